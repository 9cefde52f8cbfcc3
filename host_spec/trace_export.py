"""Export a stored run as OpenTelemetry spans: one trace, every session's spans, then the contributors' additions.

The run is the root session and its descendants; each session's spans come from
:func:`host_spec.trace_spans.session_spans`, the trace id from the root's id.

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

from host_spec.cli import SessionReader, StoredLog
from host_spec.errors import SessionError
from host_spec.events import Event
from host_spec.otlp import (
    ExportTraceServiceRequest, InstrumentationScope, OtlpResource, OtlpSpan, ResourceSpans, ScopeSpans, SpanEvent,
    SpanLink, attributes, encode_request, nanos, span_id_of, trace_id_of,
)
from host_spec.trace import SpanRef, SpanValues, TraceContributor
from host_spec.trace_spans import SpanDraft, session_spans, span_ref

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
        self._drafts: list[SpanDraft] = []
        self._by_ref: dict[SpanRef, SpanDraft] = {}
        self._turns: dict[str, list[tuple[int, int, SpanRef]]] = {}
        self._calls: dict[str, dict[str, list[SpanRef]]] = {}
        self._pending: list[Callable[[], None]] = []
        for session_id, stored in self._logs.items():
            parent = stored.header.parent_session
            read = session_spans(stored, content=content,
                                 parent_span=span_id_of(parent, 0) if parent is not None and parent in self._logs else "")
            self._drafts += read.drafts
            self._by_ref.update((draft.ref, draft) for draft in read.drafts)
            self._turns[session_id] = read.turns
            self._calls[session_id] = read.calls

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
        return span_ref(session_id, 0)

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

    def _draft(self, span: SpanRef) -> SpanDraft:
        draft = self._by_ref.get(span)
        if draft is None:
            raise KeyError(f"no span opened by seq {span.seq} of session {span.session_id}")
        return draft

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
