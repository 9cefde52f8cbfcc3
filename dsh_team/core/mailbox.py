"""The durable mailbox of a Team's folded state: its open peer messages, in queue order.

Mail is the one part of a Team that grows without bound over its life, so the
mailbox keeps only what is still open: a message is held from its queued record
until its read receipt, and queue order is a counter rather than a set of every
id seen, so a long-lived Team's state stays the size of its open mail. The fold
(:mod:`dsh_team.core.rules`) is its only writer; readers ask it which messages a
target has pending or unread.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Final, Literal

import immutables
import msgspec

from dsh_team.core.persistent import EMPTY
from dsh_team.core.snapshots import TeamMessageSnapshot

__all__ = ["Mailbox"]

#: Sort key of a ``(message id, queue index)`` item of a pending map.
_BY_INDEX: Final = itemgetter(1)


class Mailbox(msgspec.Struct, frozen=True, gc=False):
    """The open peer messages: queued, or delivered and not read yet.

    Sized by open mail, not by history: a message is held from its queued record
    until its read receipt, which settles it (its status never moves again), and
    then dropped, body and all. Delivery is not stored separately: an open
    message is delivered exactly when it has left its target's ``pending`` map for
    its ``unread`` map (the fold moves it there and nowhere else).

    Queue order is a counter: ``next_index`` is the queue index of the next queued
    record, and a current queued record carries its index, so a record appended
    twice (its index is stale) fails the fold without the mailbox remembering
    every id it ever saw. Queued records of older logs carry no index; their ids
    are kept in ``legacy`` so a repeat of one still fails (only such logs keep a
    set that grows with their history).

    Because a settled message is dropped, "read" and "never queued" look the
    same here: :meth:`status`, :meth:`is_delivered` and :meth:`is_read` answer for
    a message the caller knows was queued (from a record, the change index or its
    send), and :meth:`message` tells whether a message is still open.

    Attributes:
        messages: message id -> :class:`TeamMessageSnapshot` of every open message.
        pending: target id -> {undelivered message id -> queue index}.
        unread: target id -> {delivered, not yet read message id -> queue index}.
        read: target id -> how many of its messages were read (a counter, not a set).
        next_index: Queue index of the next queued record (how many were queued).
        legacy: Ids of queued records without a queue index (older logs only).
    """

    messages: immutables.Map[str, TeamMessageSnapshot] = EMPTY
    pending: immutables.Map[str, immutables.Map[str, int]] = EMPTY
    unread: immutables.Map[str, immutables.Map[str, int]] = EMPTY
    read: immutables.Map[str, int] = EMPTY
    next_index: int = 0
    legacy: immutables.Map[str, None] = EMPTY

    def message(self, message_id: str) -> TeamMessageSnapshot | None:
        """The open message ``message_id`` (queued, or delivered and unread), else ``None``."""
        return self.messages.get(message_id)

    def status(self, message_id: str) -> Literal["queued", "delivered", "read"]:
        """``queued``, ``delivered`` or ``read`` for a message that was queued.

        A message the mailbox no longer holds was read (settled); an id that was
        never queued cannot be told from it, so callers ask only about messages
        they know were queued.
        """
        message = self.messages.get(message_id)
        if message is None:
            return "read"
        found = self.pending.get(message.target_id)
        return "queued" if found is not None and message_id in found else "delivered"

    def is_delivered(self, message_id: str) -> bool:
        """Whether a message that was queued has been acknowledged by its target (read ones included)."""
        return self.status(message_id) != "queued"

    def is_read(self, message_id: str) -> bool:
        """Whether a message that was queued was delivered and a model step of its target has since completed with it."""
        return message_id not in self.messages

    def unread_count(self, target_id: str) -> int:
        """Messages delivered to ``target_id`` that no completed model step of it has seen yet."""
        found = self.unread.get(target_id)
        return 0 if found is None else len(found)

    def read_count(self, target_id: str) -> int:
        """Messages to ``target_id`` that a completed model step of it has seen."""
        return self.read.get(target_id, 0)

    def unread_for(self, target_id: str) -> tuple[TeamMessageSnapshot, ...]:
        """Delivered, unread messages of one target, in queue order."""
        found = self.unread.get(target_id)
        return () if found is None else self._in_order(found.items())

    def pending_count(self, target_id: str) -> int:
        found = self.pending.get(target_id)
        return 0 if found is None else len(found)

    def pending_for(self, target_id: str) -> tuple[TeamMessageSnapshot, ...]:
        """Undelivered messages for one target, in queue order."""
        found = self.pending.get(target_id)
        return () if found is None else self._in_order(found.items())

    def all_pending(self) -> tuple[TeamMessageSnapshot, ...]:
        """Every undelivered message of the Team, in queue order."""
        return self._in_order([item for inner in self.pending.values() for item in inner.items()])

    def _in_order(self, items: Any) -> tuple[TeamMessageSnapshot, ...]:
        messages = self.messages
        return tuple(messages[key] for key, _ in sorted(items, key=_BY_INDEX))
