"""Readable, member-prefixed lines for a session's conversation (the CLI's output).

The transcript is an observer plugin (``dsh_session_event``), so ``dsh run`` prints
every member's lines in commit order as they happen, interleaved the way the team
actually worked::

    [lead] user: plan the release
    [lead] assistant: I will ask a teammate.
    [lead] tool call spawn_teammate {"name":"alice",...}
    [lead] tool result spawn_teammate {"target":"alice",...}

Only the conversation surface, abnormal turn ends and a child's cold resume
(``[bob] (resumed from disk)``) are shown; ``dsh log`` prints every event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from host_spec import hookimpl
from host_spec.events import Event, EventType, json_encode
from host_spec.messages import message_text
from host_spec.permissions import TOOL_PERMISSION

__all__ = ["Transcript", "render_event", "user_lines", "format_event"]


def _lines(prefix: str, text: str) -> list[str]:
    return [f"{prefix}{line}" for line in (text.splitlines() or [""])]


def _user_text(content: list[dict[str, Any]]) -> str:
    """Text blocks joined with a space where one does not end in whitespace.

    A delivered Team message is a framing block (``Team message <id> from <name>:``)
    followed by the sender's blocks; gluing them together would read ``from bob:hi``.
    """
    text = ""
    for block in content:
        if block.get("type") == "text":
            part = block.get("text", "")
            if text and part and not text[-1].isspace():
                text += " "
            text += part
    return text


def user_lines(name: str, value: Mapping[str, Any], content: list[dict[str, Any]]) -> list[str]:
    """The lines of a ``user/message`` payload ``value`` showing ``content`` (its blocks, or some of them)."""
    kind = (value.get("source") or {}).get("kind", "user")
    who = "user" if kind == "user" else f"user ({kind})"
    return _lines(f"[{name}] {who}: ", _user_text(content))


def render_event(name: str, event: Event) -> list[str]:
    """The transcript lines of one event (none for bookkeeping events)."""
    tag = f"[{name}] "
    if event.type == EventType.USER_MESSAGE:
        value = event.value()
        return user_lines(name, value, value.get("content") or [])
    if event.type == EventType.ASSISTANT_MESSAGE:
        text = message_text(event.value().get("content") or [])
        return _lines(f"{tag}assistant: ", text) if text.strip() else []
    if event.type == EventType.TOOL_CALL:
        value = event.value()
        return [f"{tag}tool call {value.get('name')} {value.get('arguments') or '{}'}"]
    if event.type == EventType.TOOL_RESULT:
        value = event.value()
        text = message_text(value.get("content") or [])
        marker = " (error)" if value.get("is_error") else ""
        return _lines(f"{tag}tool result {value.get('name')}{marker} ", text)
    if event.type == EventType.CONTEXT_COMPACTED:
        value = event.value()
        return [f"{tag}(context compacted: {value.get('summarised')} messages summarised at "
                f"~{value.get('estimated_tokens')} of {value.get('window')} tokens)"]
    if event.type == TOOL_PERMISSION:
        value = event.value()
        if value.get("phase") == "asked":
            return [f"{tag}permission needed for call {value.get('call_id')} (rule {value.get('rule')}): "
                    "answer with /permit in dsh chat, on the web panel, or `dsh team permit` once the run stopped"]
        return [f"{tag}permission {value.get('ask_id') or '(session rule)'} allowed by {value.get('by')}"]
    if event.type == EventType.TURN_END:
        reason = event.value().get("reason") or {}
        if reason.get("kind", "completed") != "completed":
            return [f"{tag}turn ended: {json_encode(reason).decode()}"]
    return []


def format_event(event: Event) -> str:
    """One ``dsh log`` line: seq, type, compact data and the cause."""
    cause = ""
    if event.cause is not None:
        parts = [f"{key}={value}" for key, value in (
            ("agent", event.cause.agent_id), ("call", event.cause.call_id), ("tool", event.cause.tool)
        ) if value]
        cause = f"  ({' '.join(parts)})" if parts else ""
    return f"{event.seq:>5} {event.type} {bytes(event.data).decode()}{cause}"


@attrs.define(eq=False)
class Transcript:
    """Observer plugin that writes transcript lines with ``write`` as events commit.

    Agent names come from ``dsh_agent_created``; before that (crash closers appended
    while an agent is built) ``fallback(session)`` names the session.
    """

    write: Callable[[str], Any]
    fallback: Callable[[Any], str]
    names: dict[str, str] = attrs.Factory(dict)

    @hookimpl
    def dsh_agent_created(self, agent: Any) -> None:
        self.names[agent.id] = agent.name

    @hookimpl
    def dsh_agent_session_start(self, agent: Any, source: str) -> None:
        """A child reloaded from its log (cold resume) gets one marker line: it was asleep on disk."""
        if source == "resume" and getattr(agent, "parent_id", None) is not None:
            self.write(f"[{agent.name}] (resumed from disk)")

    @hookimpl
    def dsh_session_event(self, session: Any, event: Event) -> None:
        lines = render_event(self.names.get(session.id) or self.fallback(session), event)
        for line in lines:
            self.write(line)
