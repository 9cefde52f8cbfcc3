"""What a session's own log holds of Team mail, folded once per event.

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

:class:`MessageIndex` is that fact as an incremental fold: each event is applied
once and the index remembers how far it got, so whoever keeps it (the live and
carried indexes of :mod:`dsh_team.mail.holdings`) continues it instead of
re-reading a log. Decoders are built once and skip message content.

**Bounded by open mail, not history.** A session that runs for days records
messages without end, and remembering every id made a member's index grow with
them. The questions asked of an index are about mail its Lead still holds open
(a queued message to deliver or acknowledge, an unread one whose receipt is
rebuilt), a Team notice (one per limit reached), or a teammate's initial prompt
(its first message). So the index keeps the :data:`WINDOW` most recently
recorded ids; an older Team message stays only while its Lead has not settled
it (:data:`Settled`: read, and that read durable; a read message never moves
again and is never delivered or asked about again), Team notices and the first
message stay, and any other old id is let go. An index with no way to ask keeps
every Team message.

The same fold answers read receipts (:mod:`dsh_team.mail.receipts`): a recorded
Team message is *read* once an ``assistant/message`` follows it, *seen* while
none has yet. Team recovery also reads a session's own ``subagent/descriptor``
here (:func:`own_descriptor`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeAlias

import msgspec

from host_spec.events import Event, EventType, SubagentDescriptor

from dsh_team.mail.framing import TEAM_MESSAGE_SOURCE, recorded_team_message

__all__ = ["MessageIndex", "Settled", "WINDOW", "fold_messages", "own_descriptor"]

_DESCRIPTOR_VERSION: Final = 2

#: Recorded ids an index keeps however old their message (the newest ones).
WINDOW: Final = 256

#: ``(team id, Team message id) -> bool``: whether the message's Lead settled it durably
#: (read, and nothing of the Lead's log still unsynced). Must stay true once true.
Settled: TypeAlias = Callable[[str, str], bool]


def _unknown(team_id: str, message_id: str) -> bool:
    """Without a Lead to ask, no message counts as settled (the index keeps every Team message)."""
    return False


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
    team_mail = kind == TEAM_MESSAGE_SOURCE or (kind == "user" and "team_id" in message.source)
    alias = message.source.get("message_id") if team_mail else None
    return (kind if isinstance(kind, str) else "", alias if isinstance(alias, str) else None)


class MessageIndex:
    """The messages one session holds, folded from its own events.

    Args:
        position: Index into ``session.events`` folded so far (the own suffix starts there).
        settled: Whether a Team message's Lead settled it; an older recorded Team
            message is kept until it has (see the module docstring).
        window: How many of the newest recorded ids are kept whatever they are.
    """

    __slots__ = (
        "position", "_settled", "_window", "_recent", "_open", "_swept", "_kept", "_first", "_user_history", "_pending",
        "_aliases", "_read", "_seen",
    )  # fmt: skip

    def __init__(self, position: int = 0, settled: Settled | None = None, window: int = WINDOW) -> None:
        self.position = position
        self._settled = settled if settled is not None else _unknown
        self._window = window
        # Recorded ids, newest last: Team mail -> (team id, Team message id), any other -> None.
        self._recent: dict[str, tuple[str, str] | None] = {}
        self._open: dict[str, tuple[str, str]] = {}  # older recorded Team mail not settled when it left the window
        self._swept = 0  # len(_open) after its last sweep
        self._kept: set[str] = set()  # Team notices (a Team-bound source that is not mail)
        self._first: str | None = None  # the first recorded message that is neither: a provisioned prompt
        self._user_history = False
        self._pending: dict[str, tuple[str, str | None]] = {}  # id -> (kind, alias)
        self._aliases: dict[str, str] = {}  # pending alias -> id
        self._read: set[tuple[str, str]] = set()  # (team id, Team message id) answered by a reply
        self._seen: set[tuple[str, str]] = set()  # recorded since the last reply

    @property
    def held(self) -> int:
        """How many ids and receipts the index keeps (bounded by its window and its Lead's open mail)."""
        return (len(self._recent) + len(self._open) + len(self._kept) + len(self._pending) + len(self._aliases)
                + len(self._read) + len(self._seen))  # fmt: skip

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
        team = message.source.get("team_id")
        if alias is not None:
            key = (team if isinstance(team, str) else "", alias)
            self._remember(message.id, key)
            self._remember(alias, key)
        elif isinstance(team, str):
            self._kept.add(message.id)
        else:
            if self._first is None:
                self._first = message.id
            self._remember(message.id, None)
        self._user_history = self._user_history or (source == "user" and alias is None)

    def _remember(self, message_id: str, key: tuple[str, str] | None) -> None:
        """Record ``message_id``; past the window the oldest goes, unless its Lead still holds it open."""
        recent = self._recent
        if message_id in recent or message_id in self._open:
            return
        recent[message_id] = key
        if len(recent) <= self._window:
            return
        oldest = next(iter(recent))
        key = recent.pop(oldest)
        if key is None:
            return
        if self._settled(*key):
            self._read.discard(key)
            return
        self._open[oldest] = key
        if len(self._open) > 2 * self._swept + self._window:  # amortised: once they doubled since the last sweep
            self._sweep()

    def _sweep(self) -> None:
        """Let go of the older Team messages their Lead settled since they left the window."""
        kept: dict[str, tuple[str, str]] = {}
        for message_id, key in self._open.items():
            if self._settled(*key):
                self._read.discard(key)
            else:
                kept[message_id] = key
        self._open, self._swept = kept, len(kept)

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
        return self.recorded(message_id) or message_id in self._pending or message_id in self._aliases

    def recorded(self, message_id: str) -> bool:
        """Whether the message is in the history (claimed into a turn), not merely pending.

        Exact for what is asked: Team mail its Lead has not settled, Team notices,
        the first message, and any id among the newest :data:`WINDOW`.
        """
        return (message_id in self._recent or message_id in self._open or message_id in self._kept
                or message_id == self._first)  # fmt: skip

    def has_pending(self) -> bool:
        """Whether the durable inbox still has unclaimed items (work a reload starts on)."""
        return bool(self._pending)

    def holds_user_message(self) -> bool:
        """Whether any held message has source kind ``user`` (a provisioned prompt; the user's Team mail is not one)."""
        return self._user_history or any(kind == "user" and alias is None for kind, alias in self._pending.values())

    def receipt(self, team_id: str, message_id: str) -> str | None:
        """``read`` (a reply followed it), ``seen`` (recorded, no reply yet) or ``None`` (not recorded)."""
        key = (team_id, message_id)
        if key in self._read:
            return "read"
        return "seen" if key in self._seen else None


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
