"""The spans of one stored session, read from the contract's own event types.

A session's *own* events (a fork's inherited prefix is its parent's work) give::

    session <name>                 seq 0; its parent is the parent session's span
      turn <n>                     turn/start .. turn/end
        compact_context            the summary call of a context compaction (context/compacted)
        chat [<model>]             the step's start (or its last user message) .. assistant/message
        execute_tool <tool>        tool/call .. tool/result (matched by call id)

Attributes follow the OpenTelemetry GenAI conventions where one fits
(``gen_ai.usage.input_tokens``, ``gen_ai.tool.name`` ...) and ``dsh.*``
otherwise. A failed turn or tool call gets status ``ERROR`` with its error code
as the message; a turn a crash left open ends at its last event and says so
(``dsh.turn.open``); a tool call without a result is ``unknown``; a payload that
does not decode is counted (``dsh.session.unreadable_events``), never guessed at.
Message text, tool arguments and results appear only with ``content=True``:
error messages count as content (a stale-file error quotes the file).

Span ids come from :func:`host_spec.otlp.span_id_of` (session id + the seq of the
opening event) and nothing reads a clock, so the same log gives the same spans.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import msgspec

from host_spec.cli import StoredLog
from host_spec.events import (
    ContextCompaction, Event, EventType, StepMark, SubagentDescriptor, ToolCallRecord, TurnEnd, TurnStart, json_decode, json_encode,
)
from host_spec.messages import AssistantMessage, ContentBlock, ToolResultMessage, Usage, UserMessage, message_text
from host_spec.otlp import (
    SPAN_KIND_CLIENT, SPAN_KIND_INTERNAL, STATUS_ERROR, AttributeValue, SpanEvent, SpanLink, SpanStatus, attributes,
    nanos, span_id_of,
)
from host_spec.trace import SpanRef

__all__ = ["SpanDraft", "SessionSpans", "span_ref", "session_spans"]


def span_ref(session_id: str, seq: int) -> SpanRef:
    """The span opened by event ``seq`` of ``session_id`` (``0``: the session span)."""
    return SpanRef(session_id=session_id, seq=seq, span_id=span_id_of(session_id, seq))


@attrs.define
class SpanDraft:
    """A span being built: its end, attributes, events and links arrive as the log is read."""

    ref: SpanRef
    parent: str
    name: str
    kind: int
    start: int
    end: int
    values: dict[str, AttributeValue | None]
    events: list[SpanEvent] = attrs.Factory(list)
    links: list[SpanLink] = attrs.Factory(list)
    status: SpanStatus | None = None


def _agent_name(own: Sequence[Event]) -> str | None:
    """The name the session's latest readable descriptor gives its agent (a root has none)."""
    name = None
    for event in own:
        if event.type == EventType.SUBAGENT_DESCRIPTOR:
            try:
                descriptor = event.decode(SubagentDescriptor)
            except msgspec.ValidationError:
                continue
            name = descriptor.name or descriptor.label or name
    return name


def _usage(usage: Usage | None, model: str | None) -> dict[str, AttributeValue | None]:
    """A model call's GenAI model and token attributes (absent when the adapter reported none)."""
    return {
        "gen_ai.response.model": model,
        "gen_ai.usage.input_tokens": usage.input_tokens if usage is not None else None,
        "gen_ai.usage.output_tokens": usage.output_tokens if usage is not None else None,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens if usage is not None else None,
    }


def _parts(content: Sequence[ContentBlock]) -> list[dict[str, Any]]:
    """Content blocks as GenAI message parts (text, reasoning, tool_call; other kinds by type only)."""
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind in ("text", "reasoning"):
            parts.append({"type": kind, "content": block.get("text", "")})
        elif kind == "tool-call":
            arguments = block.get("arguments", "")
            try:
                arguments = json_decode(arguments)
            except (msgspec.DecodeError, TypeError):
                pass  # kept as the model wrote it
            parts.append({"type": "tool_call", "id": block.get("id"), "name": block.get("name"), "arguments": arguments})
        else:
            parts.append({"type": str(kind)})
    return parts


@attrs.define
class SessionSpans:
    """What one session's log gave.

    Attributes:
        drafts: Its spans in log order, the session span first.
        turns: ``(first seq, last seq, span)`` of each turn, in order.
        calls: Call id -> the spans of the tool calls with that id, in order.
    """

    drafts: list[SpanDraft] = attrs.Factory(list)
    turns: list[tuple[int, int, SpanRef]] = attrs.Factory(list)
    calls: dict[str, list[SpanRef]] = attrs.Factory(dict)


class _Reader:
    """Reads one session's own events into its spans (see the module docstring)."""

    def __init__(self, stored: StoredLog, parent_span: str, *, content: bool) -> None:
        self.stored = stored
        self.session_id = session_id = stored.header.id
        self.content = content
        self.result = SessionSpans()
        self.turn: SpanDraft | None = None
        self.turn_first = 0
        self.calls: dict[str, SpanDraft] = {}
        self.mark: int | None = None
        self.unreadable = 0
        self.own = stored.events[stored.header.seed_length :]
        parent = stored.header.parent_session
        name = _agent_name(self.own)
        self.last = stored.header.created_at
        self.session = self.open(SpanDraft(
            ref=span_ref(session_id, 0), parent=parent_span,
            name=f"session {name or session_id}", kind=SPAN_KIND_INTERNAL, start=stored.header.created_at, end=0,
            values={"gen_ai.agent.id": session_id, "gen_ai.agent.name": name, "dsh.session.parent": parent,
                    "dsh.session.origin": stored.header.origin},
        ))

    def open(self, draft: SpanDraft) -> SpanDraft:
        self.result.drafts.append(draft)
        return draft

    def read(self) -> SessionSpans:
        own = self.own
        for event in own:
            try:
                self.event(event)
            except msgspec.ValidationError:
                self.unreadable += 1
            self.last = event.time
        if self.turn is not None:
            self.turn.values["dsh.turn.open"] = True
            self.close_turn(own[-1].seq, self.last)
        self.session.end = self.last
        if self.unreadable:
            self.session.values["dsh.session.unreadable_events"] = self.unreadable
        if self.stored.damage is not None:
            self.session.values["dsh.session.damaged"] = True
        return self.result

    def event(self, event: Event) -> None:
        kind = event.type
        if kind == EventType.TURN_START:
            if self.turn is not None:  # a turn/start without its turn/end: the previous turn stopped here
                self.turn.values["dsh.turn.open"] = True
                self.close_turn(event.seq - 1, self.last)
            turn = event.decode(TurnStart).turn
            self.turn_first = event.seq
            self.turn = self.child(self.session, event, f"turn {turn}", {"dsh.turn": turn})
        elif kind == EventType.TURN_END and self.turn is not None:
            reason = event.decode(TurnEnd).reason
            self.turn.values["dsh.turn.end_reason"] = str(reason.get("kind"))
            error = reason.get("error")
            if isinstance(error, dict):
                self.turn.status = SpanStatus(code=STATUS_ERROR, message=str(error.get("code")))
            self.close_turn(event.seq, event.time)
        elif kind == EventType.STEP_START:
            event.decode(StepMark)
            self.mark = event.time
        elif kind == EventType.USER_MESSAGE:
            self.user_message(event)
        elif kind == EventType.ASSISTANT_MESSAGE:
            self.model_call(event)
        elif kind == EventType.TOOL_CALL:
            self.tool_call(event)
        elif kind == EventType.TOOL_RESULT:
            self.tool_result(event)
        elif kind == EventType.CONTEXT_COMPACTED:
            self.compaction(event)

    def child(self, parent: SpanDraft, event: Event, name: str, values: dict[str, AttributeValue | None],
              *, kind: int = SPAN_KIND_INTERNAL, start: int | None = None) -> SpanDraft:
        begin = event.time if start is None else start
        return self.open(SpanDraft(ref=span_ref(self.session_id, event.seq), parent=parent.ref.span_id, name=name,
                                   kind=kind, start=begin, end=event.time, values=values))

    def close_turn(self, last_seq: int, end: int) -> None:
        assert self.turn is not None
        for call in self.calls.values():
            call.end = end
            call.values["dsh.tool.outcome"] = "unknown"
        self.calls.clear()
        self.turn.end = end
        self.result.turns.append((self.turn_first, last_seq, self.turn.ref))
        self.turn = None
        self.mark = None

    def user_message(self, event: Event) -> None:
        message = event.decode(UserMessage)
        self.mark = event.time
        holder = self.turn or self.session
        values: dict[str, AttributeValue | None] = {"dsh.message.id": message.id,
                                                    "dsh.message.source": str(message.source.get("kind"))}
        if self.content:
            values["dsh.message.content"] = message_text(message.content)
        holder.events.append(SpanEvent(time_unix_nano=nanos(event.time), name="user.message",
                                       attributes=attributes(values)))

    def model_call(self, event: Event) -> None:
        message = event.decode(AssistantMessage)
        values: dict[str, AttributeValue | None] = {
            "gen_ai.operation.name": "chat", "dsh.turn": message.turn, "dsh.step": message.step,
            **_usage(message.usage, message.model), "dsh.model.interrupted": True if message.interrupted else None,
        }
        if self.content:
            values["gen_ai.output.messages"] = json_encode([{"role": "assistant", "parts": _parts(message.content)}]).decode()
        name = f"chat {message.model}" if message.model else "chat"
        self.child(self.turn or self.session, event, name, values, kind=SPAN_KIND_CLIENT,
                   start=self.mark if self.mark is not None else event.time)
        self.mark = None

    def compaction(self, event: Event) -> None:
        """The summary call that compacted the context: a model call of its own, before the step's."""
        record = event.decode(ContextCompaction)
        values: dict[str, AttributeValue | None] = {
            "gen_ai.operation.name": "chat", "dsh.compaction.summarised": record.summarised,
            "dsh.compaction.estimated_tokens": record.estimated_tokens, "dsh.compaction.window": record.window,
            **_usage(record.usage, record.model), "dsh.compaction.summary": record.summary if self.content else None,
        }
        self.child(self.turn or self.session, event, "compact_context", values, kind=SPAN_KIND_CLIENT,
                   start=self.mark if self.mark is not None else event.time)
        self.mark = event.time  # the step's own model call starts after the summary is recorded

    def tool_call(self, event: Event) -> None:
        call = event.decode(ToolCallRecord)
        values: dict[str, AttributeValue | None] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.call_id,
        }
        if self.content:
            values["gen_ai.tool.call.arguments"] = call.arguments
        draft = self.child(self.turn or self.session, event, f"execute_tool {call.name}", values)
        self.calls[call.call_id] = draft
        self.result.calls.setdefault(call.call_id, []).append(draft.ref)

    def tool_result(self, event: Event) -> None:
        result = event.decode(ToolResultMessage)
        draft = self.calls.pop(result.call_id, None)
        if draft is None:
            return
        draft.end = event.time
        draft.values["dsh.tool.outcome"] = "error" if result.is_error else "ok"
        if result.is_error:
            code = str((result.error or {}).get("code", "TOOL_ERROR"))
            draft.values["error.type"] = code
            draft.status = SpanStatus(code=STATUS_ERROR, message=code)
        if self.content:
            draft.values["gen_ai.tool.call.result"] = message_text(result.content)




def session_spans(stored: StoredLog, *, parent_span: str = "", content: bool = False) -> SessionSpans:
    """The spans of one stored session; ``parent_span`` is the span id its session span hangs under."""
    return _Reader(stored, parent_span, content=content).read()
