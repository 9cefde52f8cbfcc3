"""Whether a session durably holds a message: recorded history or durable pending inbox.

A Team message counts as delivered once its target session *holds* it, and a
teammate's provisioning succeeded once its child session holds the initial
prompt. "Holds" means either form of the same fact:

* a ``user/message`` event with that id in the session's own log (claimed into a
  turn; the history), or
* an item still pending in the durable inbox (replay of the own
  ``agent/inbox/spliced`` events: inserted minus claimed or cancelled).

A Team message is also recognised by its source (``kind: team-message``,
``message_id``), so a host that assigned its own message id still de-duplicates.
Only the *own* suffix counts: a fork inherits its parent's history, never its mail.

Checks run on every delivery and acknowledgement, so a live session is folded
incrementally (each event once, from where the last query stopped). A session
that left the live store keeps its index (:mod:`host_spec.carry`): a sleeping
teammate's stored log and its next activation continue it, so a wake never
re-reads the history. Decoders are built once and skip message content.

The same fold answers read receipts (:mod:`dsh_team.mail.receipts`): a recorded
Team message is *read* once an ``assistant/message`` follows it, *seen* while
none has yet.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from host_spec.carry import CarriedFolds
from host_spec.errors import DshError
from host_spec.events import Event, EventType, SessionHeader, SubagentDescriptor

from dsh_team.errors import TeamCode, TeamError, render_reason
from dsh_team.mail.framing import TEAM_MESSAGE_SOURCE, recorded_team_message

if TYPE_CHECKING:
    from host_spec.protocols import PersistedSession, Session, SessionStore
    from host_spec.records import AbortSignal

__all__ = [
    "MessageIndex",
    "SessionMessages",
    "fold_messages",
    "own_descriptor",
    "await_accepted",
    "creation_aborted",
    "asleep_with_work",
]

_DESCRIPTOR_VERSION: Final = 2
_TURN_EDGES: Final = frozenset({EventType.TURN_START, EventType.TURN_END})


class _Message(msgspec.Struct):
    """The identity part of a user message (content is skipped by the decoder)."""

    id: str
    source: dict[str, Any] = {}


class _Splice(msgspec.Struct):
    inserted: list[_Message] = []
    removed_ids: list[str] = []


_MESSAGE: Final = msgspec.json.Decoder(_Message)
_SPLICE: Final = msgspec.json.Decoder(_Splice)


def _identity(message: _Message) -> tuple[str, str | None]:
    """``(source kind, Team message id alias)`` of a message."""
    kind = message.source.get("kind")
    alias = message.source.get("message_id") if kind == TEAM_MESSAGE_SOURCE else None
    return (kind if isinstance(kind, str) else "", alias if isinstance(alias, str) else None)


class MessageIndex:
    """The messages one session holds, folded from its own events."""

    __slots__ = ("position", "_history", "_user_history", "_pending", "_aliases", "_read", "_seen")

    def __init__(self, position: int = 0) -> None:
        self.position = position  # index into ``session.events`` folded so far
        self._history: set[str] = set()
        self._user_history = False
        self._pending: dict[str, tuple[str, str | None]] = {}  # id -> (kind, alias)
        self._aliases: dict[str, str] = {}  # pending alias -> id
        self._read: set[tuple[str, str]] = set()  # (team id, Team message id) answered by a reply
        self._seen: set[tuple[str, str]] = set()  # recorded since the last reply

    def fold(self, events: Iterable[Event]) -> MessageIndex:
        """Apply ``events`` in order (unreadable payloads are skipped: they hold nothing)."""
        for event in events:
            kind = event.type
            if kind == EventType.ASSISTANT_MESSAGE:
                if self._seen:
                    self._read |= self._seen
                    self._seen = set()
                continue
            try:
                if kind == EventType.USER_MESSAGE:
                    found = recorded_team_message(event)
                    if found is not None:
                        self._seen.add(found)
                    self._record(_MESSAGE.decode(event.data))
                elif kind == EventType.INBOX_SPLICED:
                    self._splice(_SPLICE.decode(event.data))
            except msgspec.DecodeError:
                continue
        return self

    def _record(self, message: _Message) -> None:
        source, alias = _identity(message)
        self._history.add(message.id)
        if alias is not None:
            self._history.add(alias)
        self._user_history = self._user_history or source == "user"

    def _splice(self, splice: _Splice) -> None:
        for message_id in splice.removed_ids:
            entry = self._pending.pop(message_id, None)
            if entry is not None and entry[1] is not None:
                self._aliases.pop(entry[1], None)
        for message in splice.inserted:
            source, alias = _identity(message)
            self._pending[message.id] = (source, alias)
            if alias is not None:
                self._aliases[alias] = message.id

    def holds(self, message_id: str) -> bool:
        """Whether the message is in the history or pending in the durable inbox."""
        return message_id in self._history or message_id in self._pending or message_id in self._aliases

    def recorded(self, message_id: str) -> bool:
        """Whether the message is in the history (claimed into a turn), not merely pending."""
        return message_id in self._history

    def has_pending(self) -> bool:
        """Whether the durable inbox still has unclaimed items (work a reload starts on)."""
        return bool(self._pending)

    def holds_user_message(self) -> bool:
        """Whether any held message has source kind ``user`` (a provisioned prompt)."""
        return self._user_history or any(kind == "user" for kind, _ in self._pending.values())

    def receipt(self, team_id: str, message_id: str) -> str | None:
        """``read`` (a reply followed it), ``seen`` (recorded, no reply yet) or ``None`` (not recorded)."""
        key = (team_id, message_id)
        if key in self._read:
            return "read"
        return "seen" if key in self._seen else None


def _caught_up(index: MessageIndex, events: Sequence[Event]) -> MessageIndex:
    """``index`` after folding the events it has not seen yet."""
    count = len(events)
    if index.position < count:
        index.fold(events[index.position : count])
        index.position = count
    return index


def fold_messages(events: Iterable[Event]) -> MessageIndex:
    """The index of a stored session's own events (``persisted.own_events()``)."""
    return MessageIndex().fold(events)


def own_descriptor(events: Sequence[Event]) -> SubagentDescriptor | None:
    """The first ``subagent/descriptor`` of a session's own events, if it is a valid version 2.

    A descriptor of another version or a malformed one folds to ``None``: Team
    recovery treats both as "not the continuation that was provisioned".
    """
    for event in events:
        if event.type == EventType.SUBAGENT_DESCRIPTOR:
            try:
                descriptor = event.decode(SubagentDescriptor)
            except msgspec.DecodeError:
                return None
            return descriptor if descriptor.version == _DESCRIPTOR_VERSION else None
    return None


class SessionMessages:
    """Incremental :class:`MessageIndex` per live session, and waiters for its next event.

    The service feeds it from the host: :meth:`poke` for every committed event of a
    session someone waits on, :meth:`forget` when a session leaves the live store.
    """

    def __init__(self) -> None:
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
        return MessageIndex(header.seed_length) if carried is None else carried[1]

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
