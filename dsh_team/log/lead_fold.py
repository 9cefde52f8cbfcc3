"""The Lead's incremental Team fold: each event folded once, or a provider's fold adopted.

A Team's truth is its Lead session's log, and every read and decision needs its
folded state. The state is maintained incrementally: each new event of the session
is folded exactly once (from the session's event view, starting where the fold
stopped), so no read ever re-scans the log. When another plugin already folds every
committed Team event of the session (a :class:`TeamFolds` provider: the stream
invariant folds each candidate before it is appended), the fold adopts that
provider's state instead of folding the event a second time.

:class:`LeadFold` is a part of :class:`dsh_team.log.journal.Journal`: the journal
builds its state, and announces the changes queued here once they are durable.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

import structlog

from dsh_team.errors import TeamCode, TeamError
from dsh_team.core.fold import evolve, replay
from dsh_team.core.records import TEAM_EVENT_TYPES
from dsh_team.core.state import TeamState

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Session

__all__ = ["TeamFolds", "LeadFold"]

log = structlog.get_logger(__name__)


@runtime_checkable
class TeamFolds(Protocol):
    """A provider of each live session's committed Team fold.

    One fold owner per session: ``dsh-team-invariant`` folds every Team event once,
    before it is appended, to decide its veto; it provides that fold so the Team
    journal adopts it instead of folding the committed event again. Without a
    provider the journal folds on its own; both folds are
    :func:`dsh_team.core.fold.evolve`, so they cannot disagree.
    """

    def state(self, session: Session) -> TeamState:
        """The fold of every committed event of exactly this session object (seeded on first use)."""
        ...

    def committed(self, session: Session, event: Event) -> TeamState:
        """:meth:`state` right after the host committed ``event`` as ``session``'s newest event.

        The journal says which event just committed, so a provider that staged
        exactly that event's outcome adopts it without looking the event up in
        the log; any other provider answers :meth:`state`.
        """
        ...


#: The current :class:`TeamFolds` provider of the host, if one is loaded.
FoldSource = Callable[[], "TeamFolds | None"]


class LeadFold:
    """One Lead session's incrementally folded Team state (a part of ``Journal``).

    Attributes:
        session: The live Lead session (its id is the Team id).
        team_id: The Team id.
    """

    session: Session
    team_id: str
    _state: TeamState
    _folded: int
    #: Positions of Team changes folded but not yet known durable, oldest first.
    _pending: deque[int]
    #: Called with this fold (the journal) after its state changed (projection publication).
    _on_change: Callable[[Self], None] | None
    _folds: FoldSource | None

    @property
    def state(self) -> TeamState:
        """The folded state including every event appended so far (durable or not)."""
        return self.catch_up()

    def authoritative(self) -> TeamState:
        """The state for a decision.

        Raises:
            TeamError: ``TEAM_STREAM_FAILED`` with the failure text when the Team
                stream is corrupt (no authoritative operation can run on it); its
                details carry the broken ``rule`` and the failing ``seq``.
        """
        state = self.catch_up()
        failure = state.failure
        if failure is not None:
            raise TeamError(
                f"the Team stream failed at seq {failure.seq}: {failure.message}",
                TeamCode.STREAM_FAILED,
                team_id=self.team_id,
                rule=failure.rule,
                seq=failure.seq,
            )
        return state

    def catch_up(self) -> TeamState:
        """Fold the events appended since the last call (each event folded once).

        The fold provider's state is adopted for the first fold and for a single new
        Team event (the per-append case); a longer stretch is folded here, so every
        change's position is queued for its own announcement.
        """
        count = self.session.last_seq  # == len(events); cheaper than sizing the view
        start = self._folded
        if start >= count:
            return self._state
        events = self.session.events
        if start and count - start == 1 and events[start].type not in TEAM_EVENT_TYPES:
            # The usual catch-up of a session that leads no Team (every flush of every
            # member's log): one new event the fold ignores, so nothing is asked or folded.
            self._folded = count
            return self._state
        before = state = self._state
        pending = self._pending
        source = self._folds() if self._folds is not None else None
        if source is not None and (start == 0 or (count - start == 1 and events[start].type in TEAM_EVENT_TYPES)):
            state = source.state(self.session)
            if state.position != before.position:
                pending.append(state.position)
        else:
            durable = min(count, self.session.durable_seq)
            if durable - start > 1:
                # A durable stretch (a resumed log): batch-folded, and only its newest
                # change is queued. Every later flush reports at least this durable_seq,
                # so the announcement is the one each of its changes would have made.
                folded = replay(events[start:durable], self.team_id, state)
                if folded.position != state.position:
                    pending.append(folded.position)
                state, start = folded, durable
            for index in range(start, count):
                folded = evolve(state, events[index])
                if folded.position != state.position:
                    pending.append(folded.position)
                state = folded
        self._folded = count
        return self._changed(before, state)

    def observe(self, event: Event) -> TeamState:
        """:meth:`catch_up` after the host committed ``event`` (the per-append case).

        When ``event`` is the newest event and the only Team event not folded yet
        (the events before it, if any, are other kinds the fold ignores), it is
        folded, or the provider's fold of it adopted (:meth:`TeamFolds.committed`),
        without reading it back from the session's log; otherwise this is
        :meth:`catch_up`. Each skipped event is looked at once, here.
        """
        seq = event.seq
        start = self._folded
        if seq <= start or seq != self.session.last_seq or event.type not in TEAM_EVENT_TYPES:
            return self.catch_up()
        if seq != start + 1:
            events = self.session.events
            for index in range(start, seq - 1):
                if events[index].type in TEAM_EVENT_TYPES:
                    return self.catch_up()
        before = self._state
        source = self._folds() if self._folds is not None else None
        state = source.committed(self.session, event) if source is not None else evolve(before, event)
        if state.position != before.position:
            self._pending.append(state.position)
        self._folded = seq
        return self._changed(before, state)

    def _changed(self: Self, before: TeamState, state: TeamState) -> TeamState:
        """Keep ``state`` as the folded state; report a new failure once and tell the listener."""
        self._state = state
        failure = state.failure
        if failure is not None and before.failure is None:
            # Said once, where a user running the host sees it (the CLI shows warnings).
            log.error(
                "team.stream_failed",
                code=TeamCode.STREAM_FAILED,
                team=self.team_id,
                seq=failure.seq,
                rule=failure.rule,
                error=failure.message,
            )
        if state is not before and self._on_change is not None:
            self._on_change(self)
        return state
