"""The per-Lead journal: serialized read-check-append, then a shared flush.

A Team's truth is its Lead session's log. Every mutation runs inside that Lead's
serialized section: read the current folded state, decide (pure, may raise), and
append the record. The section ends *before* the flush, so concurrent mutations
of one Team append back to back and then share the session's group commit; each
caller still returns only after its own record is durable. Waiters are told only
after a flush made the change durable, so nobody can observe a change that a
crash could take back.

The state is maintained incrementally: each new event of the session is folded
exactly once (from the session's event view, starting where the journal stopped),
so no read ever re-scans the log. When another plugin already folds every
committed Team event of the session (a :class:`TeamFolds` provider:
the stream invariant folds each candidate before it is appended), the journal
adopts that fold instead of folding the event a second time. A failed flush leaves the record appended and
visible (the session retries it on the next flush); the caller gets
an :class:`~dsh_team.errors.UnconfirmedError` (its code names a task or any
other record) and should read before retrying.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar, overload, runtime_checkable

import structlog

from host_spec.carry import CarriedFolds

from dsh_team.errors import TeamCode, TeamError, UnconfirmedError
from dsh_team.core.fold import evolve, replay
from dsh_team.core.records import TEAM_EVENT_TYPES, TEAM_TASK
from dsh_team.core.state import TeamState, initial_state

if TYPE_CHECKING:
    from host_spec.events import Cause, Event
    from host_spec.protocols import Session

__all__ = ["TeamFolds", "Append", "Journal", "Journals"]

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: Called with the journal whose folded state changed (projection publication).
ChangeListener = Callable[["Journal"], None]


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


class Append(NamedTuple):
    """A record a decision wants in the Lead log: event type, payload (a Struct) and, rarely, its cause.

    ``cause`` ``None`` lets the host attribute the record to the current agent and
    tool call; the Team's own records (quiescence) pass an empty :class:`Cause`.
    A named tuple: one is built per Team mutation, on the durable write path.
    """

    type: str
    payload: Any
    cause: Cause | None = None


class Journal:
    """One Lead session's folded Team state and its serialized section.

    Args:
        session: The live Lead session (its id is the Team id).
        on_change: Called after the folded state changed (new object).
        on_durable: Called once a change became durable (after its flush).
        folds: Finds the host's fold provider, asked on every catch-up (a reload may
            replace or remove it); ``None``: the journal always folds itself.
        carried: ``(position, state)``: the fold of ``session.events[:position]`` by
            an earlier activation of this session, which its log continues
            (:mod:`host_spec.carry`); only the events after it are folded.
    """

    def __init__(
        self,
        session: Session,
        *,
        on_change: ChangeListener | None = None,
        on_durable: ChangeListener | None = None,
        folds: FoldSource | None = None,
        carried: tuple[int, TeamState] | None = None,
    ) -> None:
        self.session = session
        self.team_id = session.id
        self._state = initial_state(session.id)
        self._folded = 0
        #: Positions of Team changes folded but not yet known durable, oldest first.
        self._pending: deque[int] = deque()
        if carried is not None:
            self._folded, self._state = carried
            if self._state.position:
                self._pending.append(self._state.position)
        #: The serialized section (held by :meth:`transact`; multi-step roster work may hold it too).
        self.lock = asyncio.Lock()
        self._on_change = on_change
        self._on_durable = on_durable
        self._folds = folds
        self._announced = 0
        self.catch_up()
        if carried is not None and self._state is carried[1] and on_change is not None:
            if carried[1] != initial_state(session.id):
                on_change(self)  # a fresh fold of this log would have announced its state too
        self._durable_seen = session.durable_seq  # the newest durable_seq flushed() was told
        self._advance(self._durable_seen)  # what the log already holds durably is no news

    def __repr__(self) -> str:
        return f"<Journal {self.team_id} folded={self._folded} position={self._announced}>"

    @property
    def state(self) -> TeamState:
        """The folded state including every event appended so far (durable or not)."""
        return self.catch_up()

    @property
    def position(self) -> int:
        """Seq of the last Team change known durable (what waits report and compare)."""
        return self._announced

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

    def _changed(self, before: TeamState, state: TeamState) -> TeamState:
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

    def flushed(self, durable_seq: int) -> None:
        """Record that the session is durable up to ``durable_seq``; announce a new change.

        Every change at or below ``durable_seq`` is announced, even when a later one
        (appended while this flush ran) is still pending: its waiters must not wait
        for, or depend on, the next flush.
        """
        if durable_seq <= self._durable_seen:  # told already (the host feed, then the flusher)
            return
        self._durable_seen = durable_seq
        self.catch_up()
        if self._advance(durable_seq) and self._on_durable is not None:
            self._on_durable(self)

    def _advance(self, durable_seq: int) -> bool:
        """Move the announced position to the newest durable change; whether it moved."""
        pending = self._pending
        latest = self._announced
        while pending and pending[0] <= durable_seq:
            latest = pending.popleft()
        if latest == self._announced:
            return False
        self._announced = latest
        return True

    @overload
    async def transact(
        self,
        decide: Callable[[TeamState], Append | None],
        render: None = None,
        *,
        what: str,
        check: Callable[[TeamState], None] | None = None,
    ) -> None: ...

    @overload
    async def transact(
        self,
        decide: Callable[[TeamState], Append | None],
        render: Callable[[TeamState], T],
        *,
        what: str,
        check: Callable[[TeamState], None] | None = None,
    ) -> T: ...

    async def transact(
        self,
        decide: Callable[[TeamState], Append | None],
        render: Callable[[TeamState], T] | None = None,
        *,
        what: str,
        check: Callable[[TeamState], None] | None = None,
    ) -> T | None:
        """Run one read-check-append in the serialized section, then flush outside it.

        Args:
            decide: Pure decision on the current state: the record to append, or
                ``None`` to append nothing (the flush still runs, which retries an
                earlier unconfirmed record). Raises to reject; nothing is appended.
            render: Builds the result from the state after the append (inside the
                section, so it sees exactly this change); ``None``: the result is ``None``.
            what: Names the change in a persistence error ("team task task-3").
            check: Runs first in the section (mode and admission checks that must
                see the moment the queued operation starts).

        Raises:
            TeamError: whatever ``check``/``decide`` raise, ``TEAM_STREAM_FAILED``, or
                :class:`UnconfirmedError` when the flush failed (the record stays
                appended and visible): ``TEAM_TASK_PERSISTENCE_UNCONFIRMED`` for a
                task record, else ``TEAM_PERSISTENCE_UNCONFIRMED``.
        """
        async with self.lock:
            state = self.authoritative()
            if check is not None:
                check(state)
            record = decide(state)
            if record is not None:
                # The flush below follows at once: the log may start writing the record now.
                self.session.append(record.type, record.payload, cause=record.cause, write_ahead=True)
            result = render(self.catch_up()) if render is not None else None
        # The flush of :meth:`flush`, inline: one coroutine frame fewer on every mutation.
        try:
            await self.session.flush()
        except Exception as exc:
            task = record is not None and record.type == TEAM_TASK
            code = TeamCode.TASK_PERSISTENCE_UNCONFIRMED if task else TeamCode.PERSISTENCE_UNCONFIRMED
            error = self._unconfirmed(what, code, exc)
            error.value = result  # visible: the caller can show it instead of retrying
            raise error from exc
        self.flushed(self.session.durable_seq)
        return result

    async def flush(self, what: str, *, code: str = TeamCode.PERSISTENCE_UNCONFIRMED) -> None:
        """Make every appended record durable, then announce the change.

        Args:
            what: Names the change in the error text.
            code: The :class:`UnconfirmedError` code naming what is unconfirmed.

        Raises:
            UnconfirmedError: ``code`` (default ``TEAM_PERSISTENCE_UNCONFIRMED``)
                wrapping the flush failure.
        """
        try:
            await self.session.flush()
        except Exception as exc:
            raise self._unconfirmed(what, code, exc) from exc
        self.flushed(self.session.durable_seq)

    def _unconfirmed(self, what: str, code: str, exc: Exception) -> UnconfirmedError:
        return UnconfirmedError(
            f"{what} is visible but its persistence is unconfirmed ({exc}); read it before retrying",
            code=code,
            team_id=self.team_id,
        )


class Journals:
    """The journals of every live session that may lead a Team, by session id."""

    def __init__(
        self,
        *,
        on_change: ChangeListener | None = None,
        on_durable: ChangeListener | None = None,
        folds: FoldSource | None = None,
    ) -> None:
        self._by_id: dict[str, Journal] = {}
        self._on_change = on_change
        self._on_durable = on_durable
        self._folds = folds
        #: Folds of sessions that left the live store: a woken member continues its own.
        self._carried: CarriedFolds[TeamState] = CarriedFolds()

    def __iter__(self) -> Iterator[Journal]:
        return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, session: Session) -> Journal:
        """The journal of ``session``, created (one full fold) on first use.

        A new session object for the same id (a resumed activation) gets a new journal.
        """
        journal = self._by_id.get(session.id)
        if journal is None or journal.session is not session:
            journal = Journal(
                session,
                on_change=self._on_change,
                on_durable=self._on_durable,
                folds=self._folds,
                carried=self._carried.take(session.header, session.events),
            )
            self._by_id[session.id] = journal
        return journal

    def find(self, session_id: str) -> Journal | None:
        """The existing journal of a session id, if any (never creates one)."""
        return self._by_id.get(session_id)

    def drop(self, session: Session) -> None:
        """Forget ``session``'s journal (the session left the live store)."""
        journal = self._by_id.get(session.id)
        if journal is not None and journal.session is session:
            del self._by_id[session.id]
            state = journal.state
            self._carried.keep(session.header, session.events, session.last_seq, state)
