"""Where each Team entity last changed: the index behind cursor waits.

A cursor wait answers "what changed after position P" without reading the log
again: the fold keeps, per entity, the log seq of the last record that changed
it. Asking for the changes after P is then a walk over the (small) entity maps,
never over the events after P, and it is exact after a cold resume because the
index is part of the folded state (rebuilt by the same fold from the same log).

Entities and the records that touch them:

* a member (``team/member``): its roster row;
* a task (``team/task``): its snapshot, deletion included;
* a mail target (``team/message/queued``, ``/delivered``, ``/read``): its counts;
* a sent message (the same three records), kept per sender: its status
  (queued, delivered, read) and its queue index, so a sender can learn which of
  its messages moved and a view can list messages in queue order.

Read receipts and mode records do not move the wake ``position`` (see
:class:`~dsh_team.core.state.TeamState`), but a receipt still changes its
target's counts and its message's status, so it is indexed at its own seq: a
delta after P reports it even when P is the position the receipt left in place.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import immutables
import msgspec


__all__ = ["Changes", "ChangedKeys"]

#: The shared empty map (the state module's own ``EMPTY`` is the same value).
EMPTY: Final[immutables.Map[Any, Any]] = immutables.Map()


class Changes(msgspec.Struct, frozen=True, gc=False):
    """Per-entity seq of the last record that changed it (immutable; the fold replaces it).

    Attributes:
        members: member id -> seq of its last ``team/member`` record.
        tasks: task id -> seq of its last ``team/task`` record.
        mail: target id -> seq of the last mail record that changed its counts.
        sent: sender id -> {message id -> ``(queue index, seq of its last status change)``}.
    """

    members: immutables.Map[str, int] = EMPTY
    tasks: immutables.Map[str, int] = EMPTY
    mail: immutables.Map[str, int] = EMPTY
    sent: immutables.Map[str, immutables.Map[str, tuple[int, int]]] = EMPTY

    def member(self, member_id: str, seq: int) -> Changes:
        """The index after a roster record of ``member_id`` at ``seq``."""
        return Changes(self.members.set(member_id, seq), self.tasks, self.mail, self.sent)

    def task(self, task_id: str, seq: int) -> Changes:
        """The index after a task record of ``task_id`` at ``seq``."""
        return Changes(self.members, self.tasks.set(task_id, seq), self.mail, self.sent)

    def message(self, sender_id: str, message_id: str, target_id: str, index: int, seq: int) -> Changes:
        """The index after a mail record of one message (queued, delivered or read) at ``seq``."""
        outbox = self.sent.get(sender_id, EMPTY).set(message_id, (index, seq))
        return Changes(self.members, self.tasks, self.mail.set(target_id, seq), self.sent.set(sender_id, outbox))

    def after(self, since: int) -> ChangedKeys:
        """Ids of the members, tasks and mail targets changed by a record after ``since`` (unordered)."""
        return ChangedKeys(
            members=_after(self.members, since), tasks=_after(self.tasks, since), mail=_after(self.mail, since)
        )

    def sent_after(self, sender_id: str | None, since: int) -> tuple[str, ...]:
        """Messages of ``sender_id`` (``None``: of every sender) whose status changed after ``since``, in queue order."""
        if sender_id is None:
            outboxes: Iterable[immutables.Map[str, tuple[int, int]]] = self.sent.values()
        else:
            outboxes = [self.sent.get(sender_id, EMPTY)]
        moved = [(index, key) for outbox in outboxes for key, (index, seq) in outbox.items() if seq > since]
        return tuple(message_id for _, message_id in sorted(moved))

    def recent_messages(self, limit: int) -> tuple[str, ...]:
        """The ``limit`` most recently queued message ids of every sender, in queue order."""
        queued = sorted((index, message_id) for outbox in self.sent.values() for message_id, (index, _) in outbox.items())
        return tuple(message_id for _, message_id in queued[max(0, len(queued) - limit) :])


class ChangedKeys(msgspec.Struct, frozen=True):
    """What :meth:`Changes.after` found: entity ids, unordered (callers order them by the state)."""

    members: frozenset[str]
    tasks: frozenset[str]
    mail: frozenset[str]


def _after(seqs: immutables.Map[str, int], since: int) -> frozenset[str]:
    return frozenset(key for key, seq in seqs.items() if seq > since)

