"""Export a stored run as OpenTelemetry spans, from the contract's own event types.

Every session of the run (the root and its descendants) gives one span tree,
built from its *own* events (a fork's inherited prefix is its parent's work)::

    session <name>                 seq 0; child of the parent session's span
      turn <n>                     turn/start .. turn/end
        chat [<model>]             the step's start (or its last user message) .. assistant/message
        execute_tool <tool>        tool/call .. tool/result (matched by call id)

Attributes follow the OpenTelemetry GenAI conventions where one fits
(``gen_ai.usage.input_tokens``, ``gen_ai.tool.name`` ...) and ``dsh.*``
otherwise. A failed turn or tool call gets status ``ERROR`` with its error code
as the message; a turn a crash left open ends at its last event and says so
(``dsh.turn.open``); a tool call without a result is ``unknown``. Message text,
tool arguments and results appear only with ``content=True``: error messages
count as content (a stale-file error quotes the file).

Ids come from :func:`host_spec.otlp.span_id_of` (session id + the seq of the
opening event), the order is the logs' order, and nothing reads a clock, so the
same logs always export to the same bytes. Nothing is locked or written: the
logs are read through a :class:`~host_spec.cli.SessionReader`, safe next to a
live run (a torn final line is left out, as on resume). Contributors
(:mod:`host_spec.trace`) then add their events and links.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs
import msgspec

from host_spec.cli import SessionReader, StoredLog
from host_spec.errors import SessionError
from host_spec.events import Event, EventType, StepMark, SubagentDescriptor, ToolCallRecord, TurnEnd, TurnStart, json_encode
from host_spec.messages import AssistantMessage, ToolResultMessage, UserMessage, message_text
from host_spec.otlp import (
    SPAN_KIND_CLIENT, SPAN_KIND_INTERNAL, STATUS_ERROR, AttributeValue, ExportTraceServiceRequest,
    InstrumentationScope, OtlpResource, OtlpSpan, ResourceSpans, ScopeSpans, SpanEvent, SpanLink, SpanStatus,
    attributes, encode_request, nanos, span_id_of, trace_id_of,
)
from host_spec.trace import SpanRef, SpanValues, TraceContributor

__all__ = ["SCOPE", "TraceExport", "run_sessions", "TraceBuilder", "export_trace"]

#: The instrumentation scope of every exported span.
SCOPE: Final = "dsh.trace"

@attrs.frozen
class TraceExport:
    """One exported run.

    Attributes:
        data: The OTLP JSON document (ends in a newline).
        spans: How many spans it holds.
        damage: ``(session id, error)`` of each log whose committed region is damaged (the
            events before the damage are exported).
        failed: ``(contributor, error)`` of each contributor that raised (it added nothing).
    """

    data: bytes
    spans: int
    damage: tuple[tuple[str, SessionError], ...] = ()
    failed: tuple[tuple[str, str], ...] = ()


def run_sessions(reader: SessionReader, session_id: str) -> list[str]:
    """The run ``session_id`` belongs to: its root first, then the root's descendants in creation order.

    A log whose header is unreadable is not listed by the reader, so it is in no run.

    Raises:
        SessionNotFoundError: ``session_id`` is not stored.
    """
    stored = reader.list_ids()
    root, seen = session_id, {session_id}
    parent = reader.header(root).parent_session
    while parent is not None and parent not in seen and parent in stored:
        root = parent
        seen.add(root)
        parent = reader.header(root).parent_session
    ids, members = [root], {root}
    for candidate in stored:
        if candidate != root and reader.header(candidate).parent_session in members:
            members.add(candidate)  # a parent is created before its children
            ids.append(candidate)
    return ids


@attrs.define
class _Draft:
    """A span while its log is read (ends and attributes arrive later)."""

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
    name = None
    for event in own:
        if event.type == EventType.SUBAGENT_DESCRIPTOR:
            try:
                descriptor = event.decode(SubagentDescriptor)
            except msgspec.ValidationError:
                continue
            name = descriptor.name or descriptor.label or name
    return name


class TraceBuilder:
    """Builds the spans of one run and offers them to contributors (implements :class:`host_spec.trace.TraceContext`).

    Args:
        logs: The run's stored logs by session id, the root first (see :func:`run_sessions`).
        content: Export message and tool content.
    """

    def __init__(self, logs: Mapping[str, StoredLog], *, content: bool) -> None:
        self._logs = dict(logs)
        self._ids = list(logs)
        self._content = content
        self.trace_id = trace_id_of(self._ids[0])
        self._drafts: list[_Draft] = []
        self._by_ref: dict[SpanRef, _Draft] = {}
        self._turns: dict[str, list[tuple[int, int, SpanRef]]] = {}
        self._calls: dict[str, dict[str, list[SpanRef]]] = {}
        self._pending: list[Callable[[], None]] = []
        for session_id in self._ids:
            _SessionSpans(self, session_id).read()

    # ---------------------------------------------------------------- TraceContext

    @property
    def content(self) -> bool:
        return self._content

    @property
    def session_ids(self) -> Sequence[str]:
        return tuple(self._ids)

    def log(self, session_id: str) -> StoredLog:
        return self._logs[session_id]

    def own_events(self, session_id: str) -> Sequence[Event]:
        stored = self._logs[session_id]
        return stored.events[stored.header.seed_length :]

    def session_span(self, session_id: str) -> SpanRef:
        if session_id not in self._logs:
            raise KeyError(f"session {session_id} is not part of the exported run")
        return self.ref(session_id, 0)

    def turn_span(self, session_id: str, seq: int) -> SpanRef | None:
        turns = self._turns.get(session_id, [])
        index = bisect.bisect_right(turns, seq, key=lambda turn: turn[0]) - 1
        return turns[index][2] if index >= 0 and seq <= turns[index][1] else None

    def anchor(self, session_id: str, event: Event) -> SpanRef:
        agent = event.cause.agent_id if event.cause is not None else None
        if agent is None or agent not in self._logs:
            return self.session_span(session_id)
        call_id = event.cause.call_id if event.cause is not None else None
        calls = self._calls.get(agent, {}).get(call_id or "", [])
        if calls:
            started = [ref for ref in calls if self._by_ref[ref].start <= event.time]
            return (started or calls)[-1]
        turns = self._turns.get(agent, [])
        index = bisect.bisect_right(turns, event.time, key=lambda turn: self._by_ref[turn[2]].start) - 1
        return turns[index][2] if index >= 0 else self.session_span(agent)

    def add_event(self, span: SpanRef, name: str, time_ms: int, values: SpanValues) -> None:
        draft = self._draft(span)
        item = SpanEvent(time_unix_nano=nanos(time_ms), name=name, attributes=attributes(values))
        self._pending.append(lambda: draft.events.append(item))

    def add_link(self, span: SpanRef, target: SpanRef, values: SpanValues) -> None:
        draft, linked = self._draft(span), self._draft(target)
        item = SpanLink(trace_id=self.trace_id, span_id=linked.ref.span_id, attributes=attributes(values))
        self._pending.append(lambda: draft.links.append(item))

    def add_attributes(self, span: SpanRef, values: SpanValues) -> None:
        draft = self._draft(span)
        self._pending.append(lambda: draft.values.update({k: v for k, v in values.items() if k not in draft.values}))

    # ---------------------------------------------------------------- building

    @staticmethod
    def ref(session_id: str, seq: int) -> SpanRef:
        return SpanRef(session_id=session_id, seq=seq, span_id=span_id_of(session_id, seq))

    def _draft(self, span: SpanRef) -> _Draft:
        draft = self._by_ref.get(span)
        if draft is None:
            raise KeyError(f"no span opened by seq {span.seq} of session {span.session_id}")
        return draft

    def open(self, draft: _Draft) -> _Draft:
        self._drafts.append(draft)
        self._by_ref[draft.ref] = draft
        return draft

    def add_turn(self, session_id: str, first: int, last: int, ref: SpanRef) -> None:
        self._turns.setdefault(session_id, []).append((first, last, ref))

    def add_call(self, session_id: str, call_id: str, ref: SpanRef) -> None:
        self._calls.setdefault(session_id, {}).setdefault(call_id, []).append(ref)

    def contribute(self, contributor: TraceContributor) -> None:
        """Run one contributor; what it added is kept only if it returns.

        Raises:
            Exception: whatever the contributor raised (nothing it added is kept).
        """
        self._pending = []
        try:
            contributor(self)
        except BaseException:
            self._pending = []
            raise
        for apply in self._pending:
            apply()
        self._pending = []

    def request(self) -> ExportTraceServiceRequest:
        """The OTLP request of every span built so far."""
        spans = tuple(
            OtlpSpan(
                trace_id=self.trace_id, span_id=d.ref.span_id, parent_span_id=d.parent, name=d.name, kind=d.kind,
                start_time_unix_nano=nanos(d.start), end_time_unix_nano=nanos(max(d.start, d.end)),
                attributes=attributes(d.values), events=tuple(d.events), links=tuple(d.links), status=d.status,
            )
            for d in self._drafts
        )
        resource = OtlpResource(attributes=attributes({"service.name": "dsh", "dsh.root_session": self._ids[0]}))
        scope = ScopeSpans(scope=InstrumentationScope(name=SCOPE), spans=spans)
        return ExportTraceServiceRequest(resource_spans=(ResourceSpans(resource=resource, scope_spans=(scope,)),))


class _SessionSpans:
    """Reads one session's own events into its spans (see the module docstring)."""

    def __init__(self, builder: TraceBuilder, session_id: str) -> None:
        self.builder = builder
        self.session_id = session_id
        self.turn: _Draft | None = None
        self.turn_first = 0
        self.calls: dict[str, _Draft] = {}
        self.mark: int | None = None
        self.last = 0
        self.unreadable = 0
        stored = builder.log(session_id)
        parent = stored.header.parent_session
        name = _agent_name(builder.own_events(session_id))
        self.last = stored.header.created_at
        self.session = builder.open(_Draft(
            ref=builder.ref(session_id, 0),
            parent=span_id_of(parent, 0) if parent is not None and parent in builder.session_ids else "",
            name=f"session {name or session_id}", kind=SPAN_KIND_INTERNAL, start=stored.header.created_at, end=0,
            values={"gen_ai.agent.id": session_id, "gen_ai.agent.name": name, "dsh.session.parent": parent,
                    "dsh.session.origin": stored.header.origin},
        ))

    def read(self) -> None:
        stored = self.builder.log(self.session_id)
        own = self.builder.own_events(self.session_id)
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
        if stored.damage is not None:
            self.session.values["dsh.session.damaged"] = True

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

    def child(self, parent: _Draft, event: Event, name: str, values: dict[str, AttributeValue | None],
              *, kind: int = SPAN_KIND_INTERNAL, start: int | None = None) -> _Draft:
        builder = self.builder
        ref = builder.ref(self.session_id, event.seq)
        begin = event.time if start is None else start
        return builder.open(_Draft(ref=ref, parent=parent.ref.span_id, name=name, kind=kind, start=begin,
                                   end=event.time, values=values))

    def close_turn(self, last_seq: int, end: int) -> None:
        assert self.turn is not None
        for call in self.calls.values():
            call.end = end
            call.values["dsh.tool.outcome"] = "unknown"
        self.calls.clear()
        self.turn.end = end
        self.builder.add_turn(self.session_id, self.turn_first, last_seq, self.turn.ref)
        self.turn = None
        self.mark = None

    def user_message(self, event: Event) -> None:
        message = event.decode(UserMessage)
        self.mark = event.time
        holder = self.turn or self.session
        values: dict[str, AttributeValue | None] = {"dsh.message.id": message.id,
                                                    "dsh.message.source": str(message.source.get("kind"))}
        if self.builder.content:
            values["dsh.message.content"] = message_text(message.content)
        holder.events.append(SpanEvent(time_unix_nano=nanos(event.time), name="user.message",
                                       attributes=attributes(values)))

    def model_call(self, event: Event) -> None:
        message = event.decode(AssistantMessage)
        usage = message.usage
        values: dict[str, AttributeValue | None] = {
            "gen_ai.operation.name": "chat", "dsh.turn": message.turn, "dsh.step": message.step,
            "gen_ai.response.model": message.model,
            "gen_ai.usage.input_tokens": usage.input_tokens if usage is not None else None,
            "gen_ai.usage.output_tokens": usage.output_tokens if usage is not None else None,
            "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens if usage is not None else None,
            "dsh.model.interrupted": True if message.interrupted else None,
        }
        if self.builder.content:
            values["gen_ai.output.messages"] = json_encode(message.content).decode()
        name = f"chat {message.model}" if message.model else "chat"
        self.child(self.turn or self.session, event, name, values, kind=SPAN_KIND_CLIENT,
                   start=self.mark if self.mark is not None else event.time)
        self.mark = None

    def tool_call(self, event: Event) -> None:
        call = event.decode(ToolCallRecord)
        values: dict[str, AttributeValue | None] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.call_id,
        }
        if self.builder.content:
            values["gen_ai.tool.call.arguments"] = call.arguments
        draft = self.child(self.turn or self.session, event, f"execute_tool {call.name}", values)
        self.calls[call.call_id] = draft
        self.builder.add_call(self.session_id, call.call_id, draft.ref)

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
        if self.builder.content:
            draft.values["gen_ai.tool.call.result"] = message_text(result.content)


def export_trace(
    reader: SessionReader,
    session_id: str,
    *,
    content: bool = False,
    contributors: Sequence[tuple[str, TraceContributor]] = (),
) -> TraceExport:
    """The OTLP JSON of the run ``session_id`` belongs to.

    Raises:
        SessionNotFoundError: ``session_id`` is not stored.
        SessionError: a log of the run cannot be read at all (a damaged header, a foreign format).
    """
    ids = run_sessions(reader, session_id)
    damage: list[tuple[str, SessionError]] = []
    logs: dict[str, StoredLog] = {}
    for sid in ids:
        stored = logs[sid] = reader.read(sid, salvage=True)
        if stored.damage is not None:
            damage.append((sid, stored.damage))
    builder = TraceBuilder(logs, content=content)
    failed = []
    for name, contributor in contributors:
        try:
            builder.contribute(contributor)
        except Exception as exc:
            failed.append((name, f"{type(exc).__name__}: {exc}"))
    request = builder.request()
    spans = len(request.resource_spans[0].scope_spans[0].spans)
    return TraceExport(data=encode_request(request), spans=spans, damage=tuple(damage), failed=tuple(failed))
