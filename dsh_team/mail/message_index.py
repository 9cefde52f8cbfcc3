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

The same fold answers read receipts (:mod:`dsh_team.mail.receipts`): a recorded
Team message is *read* once an ``assistant/message`` follows it, *seen* while
none has yet. Team recovery also reads a session's own ``subagent/descriptor``
here (:func:`own_descriptor`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from host_spec.events import Event, EventType, SubagentDescriptor

from dsh_team.mail.framing import TEAM_MESSAGE_SOURCE, recorded_team_message

__all__ = ["MessageIndex", "fold_messages", "own_descriptor"]

_DESCRIPTOR_VERSION: Final = 2


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
        self._user_history = self._user_history or (source == "user" and alias is None)

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
