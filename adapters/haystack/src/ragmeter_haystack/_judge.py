"""A Haystack chat generator as a ragmeter judge (issue 8)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from haystack.core.serialization import component_to_dict
from haystack.dataclasses import ChatMessage

from ragmeter.errors import InvalidTypeError
from ragmeter.judge import JudgeReply, Message, clean_identity
from ragmeter_haystack._documents import reply_text, reply_usage

__all__ = ["HaystackJudge", "judge"]


class HaystackJudge:
    """Wraps a chat generator component (``run(messages=[ChatMessage]) -> {"replies": [...]}``).

    Uses ``run_async`` when the component has it, else runs ``run`` in a worker thread.
    """

    def __init__(self, chat_generator: Any) -> None:
        if not callable(getattr(chat_generator, "run", None)):
            raise InvalidTypeError(
                "judge() needs a Haystack chat generator component with "
                f"run(messages=...), got {type(chat_generator).__name__}"
            )
        self.generator = chat_generator

    @property
    def identity(self) -> Mapping[str, Any]:
        """Framework, component type and its serialised init parameters (secrets left out)."""
        params: dict[str, Any] = {}
        try:
            data = component_to_dict(self.generator, "judge")
            params = clean_identity(data.get("init_parameters", {}))
        except Exception:  # a component that cannot serialise still works as a judge
            params = {}
        return {"framework": "haystack", "class": type(self.generator).__name__, **params}

    async def complete(self, messages: Sequence[Message]) -> JudgeReply:
        """Run the generator and read the first reply's text and ``meta["usage"]``."""
        chat = [
            ChatMessage.from_system(m.content)
            if m.role == "system"
            else ChatMessage.from_assistant(m.content)
            if m.role == "assistant"
            else ChatMessage.from_user(m.content)
            for m in messages
        ]
        run_async = getattr(self.generator, "run_async", None)
        if callable(run_async):
            result = await run_async(messages=chat)
        else:
            result = await asyncio.to_thread(self.generator.run, messages=chat)
        replies = result.get("replies") or []
        if not replies:
            return JudgeReply(text="")
        first = replies[0]
        usage = reply_usage(first)
        return JudgeReply(
            text=reply_text(first) or "",
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
        )


def judge(chat_generator: Any) -> HaystackJudge:
    """Use a Haystack chat generator as the judge of ragmeter's LLM-judged metrics."""
    return HaystackJudge(chat_generator)
