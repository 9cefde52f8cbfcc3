"""The per-Lead journal: serialized read-check-append, then a shared flush.

A Team's truth is its Lead session's log. Every mutation runs inside that Lead's
serialized section: read the current folded state (kept current incrementally by
:mod:`dsh_team.log.lead_fold`), decide (pure, may raise), and append the record.
The section ends *before* the flush, so concurrent mutations of one Team append
back to back and then share the session's group commit; each caller still
returns only after its own record is durable. Waiters are told only after a
flush made the change durable, so nobody can observe a change that a crash could
take back. A failed flush leaves the record appended and visible (the session
retries it on the next flush); the caller gets an
:class:`~dsh_team.errors.UnconfirmedError` (its code names a task or any other
record) and should read before retrying.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

import msgspec

from dsh_team.errors import TeamCode, UnconfirmedError
from dsh_team.core.records import TEAM_TASK
from dsh_team.core.state import TeamState, initial_state
from dsh_team.log.lead_fold import FoldSource, LeadFold

if TYPE_CHECKING:
    from host_spec.events import Cause
    from host_spec.protocols import Session

__all__ = ["Append", "Journal"]

T = TypeVar("T")

#: Called with the journal whose folded state changed (projection publication).
ChangeListener = Callable[["Journal"], None]

#: The guard of a transaction that has none (reusable: it holds no state).
_UNGUARDED: Final = nullcontext()


class Append(msgspec.Struct, frozen=True):
    """A record a decision wants in the Lead log: event type, payload (a Struct) and, rarely, its cause.

    ``cause`` ``None`` lets the host attribute the record to the current agent and
    tool call; the Team's own records (quiescence) pass an empty :class:`Cause`.
    A frozen Struct: one is built per Team mutation, on the durable write path,
    and a Struct is built in C (a named tuple's constructor is Python code).
    """

    type: str
    payload: Any
    cause: Cause | None = None


class Journal(LeadFold):
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
    def position(self) -> int:
        """Seq of the last Team change known durable (what waits report and compare)."""
        return self._announced

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
        guard: AbstractContextManager[object] | None = None,
    ) -> None: ...

    @overload
    async def transact(
        self,
        decide: Callable[[TeamState], Append | None],
        render: Callable[[TeamState], T],
        *,
        what: str,
        check: Callable[[TeamState], None] | None = None,
        guard: AbstractContextManager[object] | None = None,
    ) -> T: ...

    async def transact(
        self,
        decide: Callable[[TeamState], Append | None],
        render: Callable[[TeamState], T] | None = None,
        *,
        what: str,
        check: Callable[[TeamState], None] | None = None,
        guard: AbstractContextManager[object] | None = None,
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
            guard: Entered when the transaction starts, before the section, and
                left once it ended, flush included (the service's lifecycle block,
                which disposal waits for). Taking it here rather than around the
                call saves a coroutine on every mutation.

        Raises:
            TeamError: whatever ``check``/``decide`` raise, ``TEAM_STREAM_FAILED``, or
                :class:`UnconfirmedError` when the flush failed (the record stays
                appended and visible): ``TEAM_TASK_PERSISTENCE_UNCONFIRMED`` for a
                task record, else ``TEAM_PERSISTENCE_UNCONFIRMED``.
        """
        with guard if guard is not None else _UNGUARDED:
            lock = self.lock
            await lock.acquire()  # not ``async with``: two coroutines fewer per mutation
            try:
                state = self.authoritative()
                if check is not None:
                    check(state)
                record = decide(state)
                if record is not None:
                    # The flush below follows at once: the log may start writing the record now.
                    self.session.append(record.type, record.payload, cause=record.cause, write_ahead=True)
                result = render(self.catch_up()) if render is not None else None
            finally:
                lock.release()
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
