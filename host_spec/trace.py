"""The trace-export contract: how a plugin adds what only it knows to a run's exported trace.

A host exports a stored run as OpenTelemetry spans (:mod:`host_spec.trace_export`
builds them, :mod:`host_spec.otlp` writes them): one span per session, one per
turn, and inside a turn one per model call and one per tool call. Those come
from the contract's own event types. A plugin's records mean something only to
the plugin (a Team message sent, delivered, read), so a distribution declares an
entry point in group :data:`TRACE_ENTRY_POINT_GROUP` (``dsh.trace``)::

    [project.entry-points."dsh.trace"]
    team = "dsh_team.views.trace:contribute"

Each entry point is a :data:`TraceContributor`, ``contribute(trace)``: it reads
the logs through ``trace`` (:class:`TraceContext`) and adds span events, links
and attributes to the host's spans, found by the event that opened them. It
never creates spans, so the span tree stays the host's. What a contributor adds
is kept only when it returns: one that raises is reported and leaves nothing.

Content (message text, tool arguments and results) is exported only when
:attr:`TraceContext.content` is true; a contributor honours it too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol

import attrs

from host_spec.cli import StoredLog
from host_spec.events import Event
from host_spec.otlp import AttributeValue

__all__ = ["TRACE_ENTRY_POINT_GROUP", "SpanValues", "SpanRef", "TraceContext", "TraceContributor"]

#: Entry-point group of trace contributors.
TRACE_ENTRY_POINT_GROUP: Final = "dsh.trace"

#: Attributes to add, in order; ``None`` values are left out.
SpanValues = Mapping[str, AttributeValue | None]


@attrs.frozen
class SpanRef:
    """A span of the export, named by the event that opened it.

    Attributes:
        session_id: The session whose log holds that event.
        seq: Its position (``0`` for the session span itself).
        span_id: The span's OTLP id (derived from both).
    """

    session_id: str
    seq: int
    span_id: str


class TraceContext(Protocol):
    """A trace being built: its logs, its spans, and where a contributor adds to them."""

    @property
    def content(self) -> bool:
        """Whether message and tool content may be exported."""
        ...

    @property
    def session_ids(self) -> Sequence[str]:
        """The run's sessions: the root first, then its descendants in creation order."""
        ...

    def log(self, session_id: str) -> StoredLog:
        """The stored log of a session of the run (its readable part when damaged)."""
        ...

    def own_events(self, session_id: str) -> Sequence[Event]:
        """A session's own events (a fork's inherited prefix left out)."""
        ...

    def session_span(self, session_id: str) -> SpanRef:
        """The span of a session of the run.

        Raises:
            KeyError: the session is not part of the run.
        """
        ...

    def turn_span(self, session_id: str, seq: int) -> SpanRef | None:
        """The turn of ``session_id`` whose events include position ``seq``, if any."""
        ...

    def anchor(self, session_id: str, event: Event) -> SpanRef:
        """Where an event stored in ``session_id``'s log belongs in the span tree.

        Its cause decides: the tool call that appended it (``cause.call_id`` of
        ``cause.agent_id``), else that agent's turn running at the event's time
        (or its latest turn before it), else that agent's session, else the span
        of ``session_id`` itself.
        """
        ...

    def add_event(self, span: SpanRef, name: str, time_ms: int, values: SpanValues) -> None:
        """Add a span event at ``time_ms`` (epoch milliseconds); ``None`` values are left out."""
        ...

    def add_link(self, span: SpanRef, target: SpanRef, values: SpanValues) -> None:
        """Add a link from ``span`` to ``target`` (same trace)."""
        ...

    def add_attributes(self, span: SpanRef, values: SpanValues) -> None:
        """Add attributes to a span (after the host's own)."""
        ...


#: The callable an entry point of :data:`TRACE_ENTRY_POINT_GROUP` names.
TraceContributor = Callable[[TraceContext], None]
