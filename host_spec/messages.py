"""Messages, content blocks and message sources.

Content blocks and sources are plain JSON objects tagged by ``type`` (blocks) or
``kind`` (sources). Plain objects keep unknown kinds intact on every round trip,
which tagged unions cannot do (an unknown tag is an error in msgspec); the few
helpers here build the core kinds so nobody spells the keys by hand.

Core blocks: ``{"type": "text", "text"}``, ``{"type": "reasoning", "text"}``,
``{"type": "tool-call", "id", "name", "arguments"}``.
Core sources: ``{"kind": "user"}``, ``{"kind": "plugin", "plugin"}``,
``{"kind": "model", "model"}``, ``{"kind": "tool", "call_id"}``; plugins add their
own (``{"kind": "team-message", "team_id", "message_id", "sender_id", "sender_name"}``).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import msgspec

__all__ = [
    "ContentBlock",
    "Source",
    "UserMessage",
    "Usage",
    "AssistantMessage",
    "ToolResultMessage",
    "text_block",
    "user_source",
    "new_message_id",
    "user_message",
    "message_text",
]

ContentBlock = dict[str, Any]
Source = dict[str, Any]


class UserMessage(msgspec.Struct, frozen=True):
    """A message addressed to an agent; ``id`` is its single dedupe identity."""

    id: str
    content: list[ContentBlock]
    source: Source
    role: Literal["user"] = "user"


class Usage(msgspec.Struct, frozen=True, omit_defaults=True):
    """Token usage of one model call, as the server reported it (``cached_tokens`` where it does)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None


class AssistantMessage(msgspec.Struct, frozen=True, omit_defaults=True):
    """Payload of ``assistant/message``: text blocks and ``tool-call`` blocks.

    ``usage`` and ``model`` (``KIND:MODEL``) say what the call cost and which model
    answered, so cost per member and per task can be folded from the logs; both are
    absent when the adapter does not report them (the scripted model).
    """

    turn: int
    step: int
    content: list[ContentBlock]
    interrupted: bool = False
    usage: Usage | None = None
    model: str | None = None


class ToolResultMessage(msgspec.Struct, frozen=True, omit_defaults=True):
    """Payload of ``tool/result``; ``error`` is ``{"code", "message"}`` for failed calls."""

    turn: int
    step: int
    call_id: str
    name: str
    content: list[ContentBlock]
    is_error: bool = False
    error: dict[str, Any] | None = None


def new_message_id() -> str:
    """A fresh UUID message id, minted once at creation."""
    return str(uuid.uuid4())


def text_block(text: str) -> ContentBlock:
    return {"type": "text", "text": text}


def user_source() -> Source:
    return {"kind": "user"}


def user_message(
    content: str | list[ContentBlock], *, source: Source | None = None, id: str | None = None
) -> UserMessage:
    """Build a user message from text or blocks (source defaults to the user)."""
    blocks = [text_block(content)] if isinstance(content, str) else list(content)
    return UserMessage(id=id or new_message_id(), content=blocks, source=source or user_source())


def message_text(content: list[ContentBlock]) -> str:
    """Concatenate the text of ``text`` blocks (other kinds are skipped)."""
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")
