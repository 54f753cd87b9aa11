"""The shape a completions or chat reply must have, checked before anything in it is used.

A server's JSON is parsed and validated in one pass by pydantic (its parser has a nesting
limit, so deep nesting is a validation error, not a RecursionError). What the run keeps
must be sound: texts are strings (OpenAI's content parts are joined into text), token
counts are integers in [0, 2**31) or None, a finish reason is a short identifier or None.
The counts and the finish reason are metadata: a bad value there becomes None instead of
costing the sample; a bad shape where the text lives makes the reply unusable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Optional, Union

from pydantic import (
    BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, StrictStr, TypeAdapter,
    ValidationError,
)

MAX_COUNT = 2 ** 31 - 1
_FINISH = re.compile(r"[A-Za-z0-9_.-]{1,40}")


class UnusableReply(Exception):
    """The reply does not have the shape of a completion; the message says where."""


def _count(value: Any) -> Optional[int]:
    """A token count: an int in range, else unknown."""
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value
    return None


def _finish(value: Any) -> Optional[str]:
    """A finish reason: a short identifier ("stop", "length", "eos"...), else unknown."""
    if isinstance(value, str) and _FINISH.fullmatch(value):
        return value
    return None


def _usage(value: Any) -> Any:
    return value if isinstance(value, dict) else None


Count = Annotated[Optional[int], BeforeValidator(_count)]
FinishReason = Annotated[Optional[str], BeforeValidator(_finish)]
Index = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Usage(_Shape):
    prompt_tokens: Count = None
    completion_tokens: Count = None


class TextPart(_Shape):
    """An OpenAI content part; only `text` parts carry text (`refusal`, images... do not)."""

    type: StrictStr
    text: Optional[StrictStr] = None


class ChatMessage(_Shape):
    content: Union[StrictStr, list[TextPart], None] = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text or "" for part in self.content if part.type == "text")
        return self.content or ""


class ChatChoice(_Shape):
    index: Index = 0
    message: ChatMessage
    finish_reason: FinishReason = None

    def text(self) -> str:
        return self.message.text()


class TextChoice(_Shape):
    index: Index = 0
    text: StrictStr
    finish_reason: FinishReason = None


class _Reply(_Shape):
    usage: Annotated[Optional[Usage], BeforeValidator(_usage)] = None


class ChatReply(_Reply):
    choices: Annotated[list[ChatChoice], Field(min_length=1)]


class CompletionReply(_Reply):
    choices: Annotated[list[TextChoice], Field(min_length=1)]


_ADAPTERS = {"chat": TypeAdapter(ChatReply), "completions": TypeAdapter(CompletionReply)}


@dataclass(frozen=True)
class Choice:
    """One validated sample: its text and finish reason."""

    text: str
    finish_reason: Optional[str]


@dataclass(frozen=True)
class Reply:
    """A validated reply: its choices in index order, and the usage counts (or None)."""

    choices: tuple[Choice, ...]
    prompt_tokens: Optional[int]
    completion_tokens: Optional[int]


def parse_reply(body: bytes, endpoint: str) -> Reply:
    """Parse and validate `body` as a reply of `endpoint` ("chat" or "completions")."""
    try:
        parsed = _ADAPTERS[endpoint].validate_json(body)
    except ValidationError as error:
        raise UnusableReply(_describe(error)) from None
    ordered = sorted(parsed.choices, key=lambda choice: choice.index)
    usage = parsed.usage or Usage()
    return Reply(
        tuple(Choice(c.text() if isinstance(c, ChatChoice) else c.text, c.finish_reason)
              for c in ordered),
        usage.prompt_tokens, usage.completion_tokens,
    )


def _describe(error: ValidationError) -> str:
    """Where and what, from Coral's schema only: never the server's values."""
    problems = error.errors(include_input=False, include_url=False, include_context=False)
    parts = []
    for problem in problems[:3]:
        where = ".".join(str(part) for part in problem["loc"]) or "body"
        parts.append(f"{where}: {problem['msg']}")
    more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
    return "; ".join(parts) + more
