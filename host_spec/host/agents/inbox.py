"""An agent's inbox: two queues projected from durable ``agent/inbox/spliced`` events.

Pending messages must survive a crash, so the queues are never the source of
truth: every change is first appended as a splice (the durable fact; an
invariant veto leaves the queues untouched), and a new inbox rebuilds both
queues by replaying the splices of the session's *own* events (a fork child does
not inherit its parent's pending work).

``next-turn`` is a FIFO of prompts, one claimed per turn; ``next-step`` holds
steering, all of it claimed at the next step boundary.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import msgspec

from host_spec.events import EventType, InboxSplice
from host_spec.messages import UserMessage

if TYPE_CHECKING:
    from host_spec.protocols import Session

__all__ = ["Inbox", "Target", "NEXT_TURN", "NEXT_STEP"]

Target = Literal["next-turn", "next-step"]
NEXT_TURN: Target = "next-turn"
NEXT_STEP: Target = "next-step"
_TYPE = operator.attrgetter("type")


class Inbox:
    """Both queues of one agent (implements ``protocols.Inbox``).

    Args:
        session: The agent's session; splices are appended to it and replayed from
            ``session.own_events()`` here, once.
        carried: ``(position, inbox)``: the inbox of an earlier activation of this
            session whose queues are the replay of ``session.events[:position]``
            (:mod:`host_spec.carry` checked that the log continues it); only the
            splices after ``position`` are replayed.
    """

    def __init__(self, session: Session, carried: tuple[int, Inbox] | None = None) -> None:
        self._session = session
        self._queues: dict[str, list[UserMessage]] = {NEXT_TURN: [], NEXT_STEP: []}
        self._ids: set[str] = set()  # ids are unique across both queues
        start = session.header.seed_length
        if carried is not None:
            position, earlier = carried
            # _apply replaces a queue list instead of mutating it, so sharing the lists is safe.
            self._queues = dict(earlier._queues)
            self._ids = set(earlier._ids)
            start = max(start, position)
        # Only splices are decoded; the selection runs in C (no Python step per other event).
        tail = session.events[start:]
        for event in itertools.compress(tail, map(EventType.INBOX_SPLICED.__eq__, map(_TYPE, tail))):
            self._apply(event.decode(InboxSplice))

    # ------------------------------------------------------------ views

    @property
    def next_turn(self) -> Sequence[UserMessage]:
        return tuple(self._queues[NEXT_TURN])

    @property
    def next_step(self) -> Sequence[UserMessage]:
        return tuple(self._queues[NEXT_STEP])

    def pending(self) -> Sequence[UserMessage]:
        """Unclaimed messages, next-step items first, then next-turn items."""
        return (*self._queues[NEXT_STEP], *self._queues[NEXT_TURN])

    def has_pending(self) -> bool:
        return bool(self._queues[NEXT_STEP] or self._queues[NEXT_TURN])

    def contains(self, message_id: str) -> bool:
        return message_id in self._ids

    # ------------------------------------------------------------ mutations

    def insert(self, message: UserMessage, target: Target) -> bool:
        """Queue ``message``; returns ``False`` (nothing written) when its id is already pending.

        Message ids are the dedupe identity, so redelivering a pending message is a no-op.
        """
        if self.contains(message.id):
            return False
        item = msgspec.to_builtins(message)
        self._splice(InboxSplice(target=target, inserted=[item]))
        return True

    def claim_step(self) -> list[UserMessage]:
        """Take every next-step item (a step boundary). Nothing is written when empty."""
        return self._claim(NEXT_STEP, len(self._queues[NEXT_STEP]))

    def claim_turn(self) -> UserMessage | None:
        """Take the first next-turn item (a turn's prompt), or ``None``."""
        claimed = self._claim(NEXT_TURN, 1)
        return claimed[0] if claimed else None

    def clear(self) -> list[UserMessage]:
        """Discard everything pending (``canceled`` splices: next-step first, then next-turn)."""
        discarded: list[UserMessage] = []
        for target in (NEXT_STEP, NEXT_TURN):
            queue = self._queues[target]
            if queue:
                ids = [m.id for m in queue]
                self._splice(InboxSplice(target=target, removed_ids=ids, outcome="canceled"))
                discarded.extend(queue)  # _splice replaced the list; ``queue`` is the old one
        return discarded

    # ------------------------------------------------------------ internals

    def _claim(self, target: Target, count: int) -> list[UserMessage]:
        taken = self._queues[target][:count]
        if taken:
            self._splice(InboxSplice(target=target, removed_ids=[m.id for m in taken], outcome="claimed"))
        return taken

    def _splice(self, splice: InboxSplice) -> None:
        # Durable fact first: if the append is vetoed the queues are unchanged.
        self._session.append(EventType.INBOX_SPLICED, splice)
        self._apply(splice)

    def _apply(self, splice: InboxSplice) -> None:
        queue = self._queues[splice.target]
        if splice.removed_ids:
            removed = set(splice.removed_ids)
            queue = [m for m in queue if m.id not in removed]
            self._ids.difference_update(removed)
        if splice.inserted:
            added = [msgspec.convert(item, UserMessage) for item in splice.inserted]
            queue = queue + added
            self._ids.update(m.id for m in added)
        self._queues[splice.target] = queue
