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
* a sent message (the same three records), kept per sender in its
  :class:`Outbox`: the message's queue index, the names a view shows and the seq
  of its last status change, so a sender can learn which of its messages moved.

Bounded by what is live, not by history: an outbox keeps every message that is
not read yet, but only the :data:`SETTLED_KEPT` most recently read ones (a read
message is final: its status never moves again) and the seq of the newest read
it let go. A cursor older than that seq could miss a message, so
:meth:`Changes.sent_after` answers ``None`` (the delta names ``sent`` as
truncated: re-list it). Because the outbox keeps one more read message than a
delta lists, such a cursor finds more than :data:`DELTA_CAP` rows anyway, and the
delta is the one an unbounded index would give. :attr:`Changes.recent` keeps the
:data:`RECENT_KEPT` most recently queued messages for the offline views.

Read receipts and mode records do not move the wake ``position`` (see
:class:`~dsh_team.core.state.TeamState`), but a receipt still changes its
target's counts and its message's status, so it is indexed at its own seq: a
delta after P reports it even when P is the position the receipt left in place.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Final

import immutables
import msgspec

from dsh_team.core.persistent import EMPTY

__all__ = ["DELTA_CAP", "SETTLED_KEPT", "RECENT_KEPT", "SentMessage", "Outbox", "Changes", "ChangedKeys"]

#: Most rows of one kind in a delta; more and that kind is ``truncated`` (re-list it).
DELTA_CAP: Final = 24

#: Read messages an outbox keeps: one more than a delta lists (see the module docstring).
SETTLED_KEPT: Final = DELTA_CAP + 1

#: Most recently queued messages the index keeps for ``dsh team show`` and the web panel.
RECENT_KEPT: Final = 20


class SentMessage(msgspec.Struct, frozen=True, gc=False):
    """One message as the index keeps it: enough for a view once its body is gone.

    Attributes:
        message_id: The message.
        sender_name: The sender's name as queued.
        target_id: The target member id (the Lead's is the Team id).
        index: Its queue index (queue order across the Team).
        seq: Seq of the record that last changed its status (queued, delivered, read).
    """

    message_id: str
    sender_name: str
    target_id: str
    index: int
    seq: int

    def moved(self, seq: int) -> SentMessage:
        """This entry after a status change at ``seq``."""
        return SentMessage(self.message_id, self.sender_name, self.target_id, self.index, seq)


class Outbox(msgspec.Struct, frozen=True, gc=False):
    """One sender's messages in the index (immutable).

    Attributes:
        open: Message id -> entry of each message not read yet.
        settled: The :data:`SETTLED_KEPT` most recently read messages, oldest receipt first.
        dropped: Seq of the newest receipt whose message left ``settled`` (0: none did).
    """

    open: immutables.Map[str, SentMessage] = EMPTY
    settled: tuple[SentMessage, ...] = ()
    dropped: int = 0


_NO_OUTBOX: Final = Outbox()

#: Sort key of an entry: queue order.
_BY_QUEUE: Final = attrgetter("index")


class Changes(msgspec.Struct, frozen=True, gc=False):
    """Per-entity seq of the last record that changed it (immutable; the fold replaces it).

    Attributes:
        members: member id -> seq of its last ``team/member`` record.
        tasks: task id -> seq of its last ``team/task`` record.
        mail: target id -> seq of the last mail record that changed its counts.
        sent: sender id -> its :class:`Outbox`.
        recent: The :data:`RECENT_KEPT` most recently queued messages, in queue order
            (as queued: their ``seq`` is the queued record's).
    """

    members: immutables.Map[str, int] = EMPTY
    tasks: immutables.Map[str, int] = EMPTY
    mail: immutables.Map[str, int] = EMPTY
    sent: immutables.Map[str, Outbox] = EMPTY
    recent: tuple[SentMessage, ...] = ()

    def member(self, member_id: str, seq: int) -> Changes:
        """The index after a roster record of ``member_id`` at ``seq``."""
        return Changes(self.members.set(member_id, seq), self.tasks, self.mail, self.sent, self.recent)

    def task(self, task_id: str, seq: int) -> Changes:
        """The index after a task record of ``task_id`` at ``seq``."""
        return Changes(self.members, self.tasks.set(task_id, seq), self.mail, self.sent, self.recent)

    def queued(self, sender_id: str, entry: SentMessage) -> Changes:
        """The index after the queued record of a message (``entry.seq`` is that record's)."""
        outbox = self.sent.get(sender_id, _NO_OUTBOX)
        outbox = Outbox(outbox.open.set(entry.message_id, entry), outbox.settled, outbox.dropped)
        recent = self.recent[1:] if len(self.recent) >= RECENT_KEPT else self.recent
        return Changes(
            self.members, self.tasks, self.mail.set(entry.target_id, entry.seq), self.sent.set(sender_id, outbox),
            (*recent, entry),
        )

    def delivered(self, sender_id: str, message_id: str, seq: int) -> Changes:
        """The index after the delivery record of an open message of ``sender_id`` at ``seq``."""
        outbox = self.sent[sender_id]
        entry = outbox.open[message_id].moved(seq)
        outbox = Outbox(outbox.open.set(message_id, entry), outbox.settled, outbox.dropped)
        return Changes(self.members, self.tasks, self.mail.set(entry.target_id, seq), self.sent.set(sender_id, outbox),
                       self.recent)

    def read(self, sender_id: str, message_id: str, seq: int) -> Changes:
        """The index after the read receipt of an open message of ``sender_id`` at ``seq``: it settles."""
        outbox = self.sent[sender_id]
        entry = outbox.open[message_id].moved(seq)
        settled, dropped = (*outbox.settled, entry), outbox.dropped
        if len(settled) > SETTLED_KEPT:
            dropped = settled[0].seq
            settled = settled[1:]
        outbox = Outbox(outbox.open.delete(message_id), settled, dropped)
        return Changes(self.members, self.tasks, self.mail.set(entry.target_id, seq), self.sent.set(sender_id, outbox),
                       self.recent)

    def after(self, since: int) -> ChangedKeys:
        """Ids of the members, tasks and mail targets changed by a record after ``since`` (unordered)."""
        return ChangedKeys(
            members=_after(self.members, since), tasks=_after(self.tasks, since), mail=_after(self.mail, since)
        )

    def sent_after(self, sender_id: str | None, since: int) -> tuple[SentMessage, ...] | None:
        """Messages of ``sender_id`` (``None``: of every sender) whose status changed after ``since``, in queue order.

        ``None`` when an outbox let go of a message read after ``since``: the answer
        would be incomplete, so the caller re-lists instead.
        """
        if sender_id is None:
            outboxes = list(self.sent.values())
        else:
            outboxes = [self.sent.get(sender_id, _NO_OUTBOX)]
        moved: list[SentMessage] = []
        for outbox in outboxes:
            if outbox.dropped > since:
                return None
            moved.extend(entry for entry in outbox.open.values() if entry.seq > since)
            for entry in reversed(outbox.settled):  # receipts are in seq order: stop at the first old one
                if entry.seq <= since:
                    break
                moved.append(entry)
        moved.sort(key=_BY_QUEUE)
        return tuple(moved)

    def recent_messages(self, limit: int = RECENT_KEPT) -> tuple[SentMessage, ...]:
        """The ``limit`` (at most :data:`RECENT_KEPT`) most recently queued messages, in queue order."""
        return self.recent[max(0, len(self.recent) - limit) :]


class ChangedKeys(msgspec.Struct, frozen=True):
    """What :meth:`Changes.after` found: entity ids, unordered (callers order them by the state)."""

    members: frozenset[str]
    tasks: frozenset[str]
    mail: frozenset[str]


def _after(seqs: immutables.Map[str, int], since: int) -> frozenset[str]:
    return frozenset(key for key, seq in seqs.items() if seq > since)
