"""Read receipts: a delivered Team message is *read* once a model step of its target completed with it.

The rule, on the target's own log: a Team message recorded in the history (a
``user/message`` with a Team source) is read at the first ``assistant/message``
after it; that reply was produced by a model call whose context held the
message. The receipt is one ``team/message/read`` record in the Lead log:

* **Once.** The record is decided in the journal's serialized section and only
  for a delivered message still in its target's ``unread`` map, so a second
  observation, a retry or a concurrent reconciliation appends nothing.
* **After delivery.** A step can complete before the delivery acknowledgement
  of the same message was written; the delivery is acknowledged first (the
  target holds the message: it is in its history).
* **Across crashes.** Live observation keeps only memory; whatever a crash lost
  (a step that completed before its receipt was durable, or a message recorded
  before the restart whose step completes after it) is rebuilt when a member
  starts, from the target's message index (:mod:`dsh_team.mail.holdings`, which
  folds each event of a target's log once, across its activations; it answers
  what :func:`scan_receipts`, the plain scan of a log, would).

Observation is O(1) per event: only ``user/message`` payloads are decoded (their
source only), and an ``assistant/message`` is recognised by its type.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import structlog

from host_spec.events import EventType

from dsh_team.core.records import TEAM_MESSAGE_READ, VERSION, MessageReadRecord
from dsh_team.core.snapshots import TeamMessageSnapshot
from dsh_team.errors import render_reason
from dsh_team.log.journal import Append, Journal
from dsh_team.mail.framing import recorded_team_message
from dsh_team.mail.message_index import MessageIndex
from dsh_team.core.state import TeamState

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Agent, Host, Session
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.mail.dispatch import Dispatcher
    from dsh_team.log.membership import MembershipResolver

__all__ = ["ReadReceipts", "scan_receipts"]

log = structlog.get_logger(__name__)


def scan_receipts(events: Iterable[Event], team_id: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(read, seen)`` Team message ids of ``team_id`` in a session's own events.

    ``read``: recorded and followed by an ``assistant/message``. ``seen``: recorded
    after the last ``assistant/message`` (read at the next completed step).
    """
    read: set[str] = set()
    seen: set[str] = set()
    for event in events:
        if event.type == EventType.ASSISTANT_MESSAGE:
            read |= seen
            seen.clear()
        elif event.type == EventType.USER_MESSAGE:
            found = recorded_team_message(event)
            if found is not None and found[0] == team_id:
                seen.add(found[1])
    return frozenset(read), frozenset(seen)


class ReadReceipts:
    """Observes targets' steps and appends read receipts (see the module docstring).

    Args:
        host, journals, members, lifecycle: The service's host, journals, membership and lifetime.
        dispatcher: Acknowledges a delivery a receipt must follow.
    """

    def __init__(
        self, host: Host, journals: Journals, members: MembershipResolver, lifecycle: Lifecycle, dispatcher: Dispatcher
    ) -> None:
        self.host = host
        self.journals = journals
        self.members = members
        self.lifecycle = lifecycle
        self.dispatcher = dispatcher
        #: session id -> {Team message id -> team id} recorded since that session's last reply.
        self._seen: dict[str, dict[str, str]] = {}

    def observe(self, session: Session, event: Event) -> None:
        """Remember recorded Team messages; a reply makes them read (the receipts are appended soon).

        Given only user and assistant messages: the coordination room skips every
        other event before it reaches the mail rooms.
        """
        if event.type == EventType.USER_MESSAGE:
            found = recorded_team_message(event)
            if found is not None:
                self._seen.setdefault(session.id, {})[found[1]] = found[0]
        else:  # an assistant message: the reply
            seen = self._seen.pop(session.id, None)
            if seen is not None and not self.lifecycle.disposed:
                for message_id, team_id in seen.items():
                    self._schedule(team_id, message_id)

    def _schedule(self, team_id: str, message_id: str) -> None:
        journal = self.journals.find(team_id)
        if journal is None:
            return
        message = journal.state.mail.message(message_id)  # None: never queued here, or read already
        if message is None:
            return
        self.host.call_soon(lambda: self._mark_soon(journal, message))

    def _mark_soon(self, journal: Journal, message: TeamMessageSnapshot) -> object:
        if self.lifecycle.disposed:
            return None
        return self.lifecycle.track(self.mark(journal, message))

    async def mark(self, journal: Journal, message: TeamMessageSnapshot) -> bool:
        """Append the receipt of ``message`` (acknowledging its delivery first); failures are logged."""
        try:
            # Records the delivery first when the reply overtook its acknowledgement (a
            # no-op for a delivered message); a message its target does not hold gets no receipt.
            await self.dispatcher.acknowledge(journal, message)

            def decide(state: TeamState) -> Append | None:
                # ``message`` was queued: open and delivered is unread; not open is read already.
                mail = state.mail
                if not mail.is_delivered(message.id) or mail.is_read(message.id):
                    return None
                record = MessageReadRecord(
                    version=VERSION, team_id=journal.team_id, message_id=message.id, target_id=message.target_id
                )
                return Append(TEAM_MESSAGE_READ, record)

            await journal.transact(decide, what=f"read receipt of team message {message.id}")
            return journal.state.mail.is_read(message.id)
        except Exception as exc:
            log.warning("team.read_receipt_failed", message=message.id, error=render_reason(exc))
            return False

    async def reconcile(self, agent: Agent) -> int:
        """Rebuild the receipts a crash lost for the targets a starting member covers.

        The Lead covers every target with unread mail, a teammate itself. Messages
        a completed step already saw get their receipt now; recorded ones with no
        reply yet are remembered for the next reply.

        Returns:
            How many of those messages are read now.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER`` (the caller's recovery logs it).
        """
        membership = self.members.resolve(agent)
        journal = self.journals.get(membership.root.session)
        mail = journal.state.mail
        if membership.is_lead:
            targets = list(mail.unread)
        else:
            targets = [agent.id] if mail.unread_count(agent.id) else []
        count = 0
        for target_id in targets:
            unread = mail.unread_for(target_id)
            index = await self._index(target_id)
            for message in unread:
                receipt = index.receipt(journal.team_id, message.id)
                if receipt == "read":
                    count += await self.mark(journal, message)
                elif receipt == "seen":
                    self._seen.setdefault(target_id, {})[message.id] = journal.team_id
        return count

    async def _index(self, session_id: str) -> MessageIndex:
        """The target's message index: continued, never re-read from the start (:mod:`.holdings`)."""
        messages = self.dispatcher.messages
        session = self.host.sessions.get(session_id)
        if session is not None:
            return messages.index(session)
        return messages.stored(await self.host.sessions.inspect(session_id))
