"""A LangChain chat model as a ragmeter judge (issue 8)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ragmeter.errors import InvalidTypeError
from ragmeter.judge import JudgeReply, Message, clean_identity

__all__ = ["LangChainJudge", "judge"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
        return "".join(parts)
    return str(content)


class LangChainJudge:
    """Wraps any ``BaseChatModel``; ``identity`` is its type and identifying parameters."""

    def __init__(self, chat_model: BaseChatModel) -> None:
        if not isinstance(chat_model, BaseChatModel):
            raise InvalidTypeError(
                f"judge() needs a langchain_core BaseChatModel, got {type(chat_model).__name__}"
            )
        self.chat_model = chat_model

    @property
    def identity(self) -> Mapping[str, Any]:
        """Framework, model class and identifying params (secrets left out)."""
        try:
            params = dict(self.chat_model._identifying_params)
        except Exception:  # a model whose params cannot be read still works
            params = {}
        clean = clean_identity(params)
        return {"framework": "langchain", "class": type(self.chat_model).__name__, **clean}

    async def complete(self, messages: Sequence[Message]) -> JudgeReply:
        """``ainvoke`` the model and read text and ``usage_metadata``."""
        converted: list[BaseMessage] = []
        for m in messages:
            if m.role == "system":
                converted.append(SystemMessage(content=m.content))
            elif m.role == "assistant":
                converted.append(AIMessage(content=m.content))
            else:
                converted.append(HumanMessage(content=m.content))
        result = await self.chat_model.ainvoke(converted)
        usage = getattr(result, "usage_metadata", None) or {}
        return JudgeReply(
            text=_text(result.content),
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
        )


def judge(chat_model: BaseChatModel) -> LangChainJudge:
    """Use ``chat_model`` (any LangChain ``BaseChatModel``) as the judge of ragmeter's
    LLM-judged metrics, e.g. ``ragmeter.judge.Faithfulness(judge=judge(model))``."""
    return LangChainJudge(chat_model)
