"""Whether a live or sleeping session durably holds a message, and waiting until it does.

Checks run on every delivery and acknowledgement, so each session's
:class:`~dsh_team.mail.message_index.MessageIndex` (what its own log holds:
history or durable pending inbox) is kept and folded incrementally, each event
once, from where the last query stopped. A session that left the live store
keeps its index (:mod:`host_spec.carry`): a sleeping teammate's stored log and
its next activation continue it, so a wake never re-reads the history. Each
index asks the Team's journals which of its older messages are settled
(:func:`settled_in`), so it keeps what its Lead holds open, not every id.

A teammate's creation waits here until its child session holds the initial
prompt (:func:`await_accepted`), woken by the child's next event or its
disposal; the quiescence watch asks whether a session that is not live still
has work the host resumes it for (:func:`asleep_with_work`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from host_spec.carry import CarriedFolds
from host_spec.errors import DshError
from host_spec.events import Event, EventType, SessionHeader

from dsh_team.errors import TeamCode, TeamError, render_reason
from dsh_team.mail.message_index import MessageIndex, fold_messages

if TYPE_CHECKING:
    from dsh_team.log.journals import Journals
    from host_spec.protocols import PersistedSession, Session, SessionStore
    from host_spec.records import AbortSignal

__all__ = [
    "SessionMessages",
    "await_accepted",
    "creation_aborted",
    "asleep_with_work",
    "settled_in",
]

_TURN_EDGES: Final = frozenset({EventType.TURN_START, EventType.TURN_END})


def settled_in(journals: Journals) -> Callable[[str, str, str], bool]:
    """``(target id, team id, message id) -> bool``: whether the Team's live journal settled the message for good.

    Settled: no longer open (the Lead's log queued it, then read it), in a fold
    that did not fail, with every mail record of its target durable, so no crash
    or failed write can take the read back. A Team whose journal is not loaded
    here, or a target it has no mail record of, says nothing is settled: the
    index keeps the message.
    """

    def settled(target_id: str, team_id: str, message_id: str) -> bool:
        journal = journals.find(team_id)
        if journal is None:
            return False
        state = journal.state
        last = state.changes.mail.get(target_id)
        return (
            state.failure is None
            and last is not None
            and last <= journal.session.durable_seq
            and state.mail.message(message_id) is None
        )

    return settled


def _caught_up(index: MessageIndex, events: Sequence[Event]) -> MessageIndex:
    """``index`` after folding the events it has not seen yet."""
    count = len(events)
    if index.position < count:
        index.fold(events[index.position : count])
        index.position = count
    return index


class SessionMessages:
    """Incremental :class:`MessageIndex` per live session, and waiters for its next event.

    The service feeds it from the host: :meth:`poke` for every committed event of a
    session someone waits on, :meth:`forget` when a session leaves the live store.

    Args:
        settled: ``(target id, team id, message id) -> bool``, asked by the index of
            the target's session which of its older Team messages it may let go
            (:func:`settled_in`); without it, none.
    """

    def __init__(self, settled: Callable[[str, str, str], bool] | None = None) -> None:
        self._settled = settled
        self._live: dict[str, tuple[Session, MessageIndex]] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        #: Indexes of sessions that left the live store, continued by their next read.
        self._carried: CarriedFolds[MessageIndex] = CarriedFolds()

    def index(self, session: Session) -> MessageIndex:
        """The up-to-date index of a live session (folds only events appended since the last call)."""
        entry = self._live.get(session.id)
        if entry is None or entry[0] is not session:
            entry = (session, self._continued(session.header, session.events))
            self._live[session.id] = entry
        return _caught_up(entry[1], session.events)

    def stored(self, stored: PersistedSession) -> MessageIndex:
        """The index of a session read from storage, continuing the one its last activation left.

        The caller checked that the session is not live; the index is kept for its next read.
        """
        events = stored.events
        index = _caught_up(self._continued(stored.header, events), events)
        self._carried.keep(stored.header, events, index.position, index)
        return index

    def _continued(self, header: SessionHeader, events: Sequence[Event]) -> MessageIndex:
        carried = self._carried.take(header, events)
        if carried is not None:
            return carried[1]
        settled = self._settled
        return MessageIndex(header.seed_length, None if settled is None else functools.partial(settled, header.id))

    def holds(self, session: Session, message_id: str) -> bool:
        return self.index(session).holds(message_id)

    def poke(self, session: Session) -> None:
        """Something was appended to ``session``: wake whoever waits on it."""
        if self._waiters:
            for waiter in self._waiters.pop(session.id, ()):
                with contextlib.suppress(asyncio.InvalidStateError):  # already settled: nothing to wake
                    waiter.set_result(None)

    def waiting_sessions(self) -> int:
        """Sessions with a parked :meth:`next_change`; woken or abandoned waits leave no entry behind."""
        return len(self._waiters)

    def forget(self, session: Session) -> None:
        """``session`` left the live store: drop its index and wake its waiters."""
        entry = self._live.get(session.id)
        if entry is not None and entry[0] is session:
            del self._live[session.id]
            self._carried.keep(session.header, session.events, entry[1].position, entry[1])
        self.poke(session)

    async def next_change(self, session: Session, signal: AbortSignal | None) -> None:
        """Wait for the next event on ``session`` or its disposal.

        Raises:
            BaseException: :func:`creation_aborted` of the reason when ``signal`` aborts first.
        """
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(session.id, []).append(waiter)

        def aborted(reason: Any) -> None:
            with contextlib.suppress(asyncio.InvalidStateError):  # already woken: the change won
                waiter.set_exception(creation_aborted(reason))

        remove = signal.on_abort(aborted) if signal is not None else None
        try:
            await waiter
        finally:
            if remove is not None:
                remove()
            self._unregister(session.id, waiter)

    def _unregister(self, session_id: str, waiter: asyncio.Future[None]) -> None:
        waiters = self._waiters.get(session_id)
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                del self._waiters[session_id]


def creation_aborted(reason: Any) -> BaseException:
    """What an aborted teammate creation raises: an exception reason as is, else ``TEAM_DISPOSED``."""
    if isinstance(reason, BaseException):
        return reason
    return TeamError(f"teammate creation aborted: {render_reason(reason)}", TeamCode.DISPOSED)


async def await_accepted(
    sessions: SessionStore,
    messages: SessionMessages,
    session_id: str,
    message_id: str,
    signal: AbortSignal | None = None,
) -> None:
    """Return once the session ``session_id`` durably holds ``message_id``.

    This is how a teammate's creation learns its initial prompt was accepted.

    A live session is flushed and checked, and otherwise watched until its next
    event or its disposal; a session that is not live is read from storage once.

    Raises:
        TeamError: ``TEAM_PROVISIONING_CONFLICT`` when the stored session does not
            hold the message; ``TEAM_DISPOSED`` for a non-exception abort reason.
        BaseException: an exception abort reason; storage errors (not found, corrupt).
    """
    while True:
        if signal is not None and signal.aborted:
            raise creation_aborted(signal.reason)
        session = sessions.get(session_id)
        if session is None:
            stored = await sessions.inspect(session_id)
            if messages.stored(stored).holds(message_id):
                return
            raise TeamError(
                f'initial prompt "{message_id}" was not durably accepted by {session_id}',
                TeamCode.PROVISIONING_CONFLICT,
                session_id=session_id,
            )
        held = messages.holds(session, message_id)
        await session.flush()  # durable: everything appended before the flush call
        if held:
            return
        if sessions.get(session_id) is not session:
            continue  # disposed during the flush: nobody would wake a waiter on it; read storage
        if not messages.holds(session, message_id):
            await messages.next_change(session, signal)
        # else it arrived during the flush: loop to flush it too


async def asleep_with_work(sessions: SessionStore, session_id: str) -> bool:
    """Whether a session that is not live still has work the host resumes it for.

    Unclaimed inbox items (a teammate's initial prompt accepted just before a crash)
    or an open turn (a crash stopped it mid-turn): the host reloads such a child, so
    its Team is not quiet yet. A live session, or one that cannot be read, has none.
    """
    if sessions.get(session_id) is not None:
        return False
    try:
        events = (await sessions.inspect(session_id)).own_events()
    except DshError:
        return False
    turns = [event.type for event in events if event.type in _TURN_EDGES]
    return fold_messages(events).has_pending() or (bool(turns) and turns[-1] == EventType.TURN_START)
