"""A LlamaIndex LLM as a ragmeter judge (issue 8)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import LLM

from ragmeter.errors import InvalidTypeError
from ragmeter.judge import JudgeReply, Message

__all__ = ["LlamaIndexJudge", "judge"]

_ROLES = {
    "system": MessageRole.SYSTEM,
    "assistant": MessageRole.ASSISTANT,
    "user": MessageRole.USER,
}


def _usage(raw: Any, key_sets: Sequence[tuple[str, ...]]) -> int | None:
    if raw is None:
        return None
    usage = raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None)
    if usage is None:
        return None
    for keys in key_sets:
        for key in keys:
            value = usage.get(key) if isinstance(usage, Mapping) else getattr(usage, key, None)
            if isinstance(value, int):
                return value
    return None


class LlamaIndexJudge:
    """Wraps any LlamaIndex ``LLM``; ``identity`` is its class, model name and temperature."""

    def __init__(self, llm: LLM) -> None:
        if not isinstance(llm, LLM):
            raise InvalidTypeError(f"judge() needs a llama_index LLM, got {type(llm).__name__}")
        self.llm = llm

    @property
    def identity(self) -> Mapping[str, Any]:
        """Framework, class name, model name and temperature when the LLM has them."""
        meta = self.llm.metadata
        out: dict[str, Any] = {
            "framework": "llamaindex",
            "class": self.llm.class_name(),
            "model": getattr(meta, "model_name", None),
        }
        for attr in ("temperature", "max_tokens", "top_p"):
            value = getattr(self.llm, attr, None)
            if isinstance(value, (int, float, str)):
                out[attr] = value
        return out

    async def complete(self, messages: Sequence[Message]) -> JudgeReply:
        """``achat`` the LLM and read the message text (and usage when reported)."""
        chat = [
            ChatMessage(role=_ROLES.get(m.role, MessageRole.USER), content=m.content)
            for m in messages
        ]
        response = await self.llm.achat(chat)
        raw = getattr(response, "raw", None)
        return JudgeReply(
            text=str(response.message.content or ""),
            input_tokens=_usage(raw, [("prompt_tokens", "input_tokens")]),
            output_tokens=_usage(raw, [("completion_tokens", "output_tokens")]),
        )


def judge(llm: LLM) -> LlamaIndexJudge:
    """Use ``llm`` (any LlamaIndex LLM) as the judge of ragmeter's LLM-judged metrics."""
    return LlamaIndexJudge(llm)
