"""Delivery of queued Team mail: per-target FIFO, de-duplicated, acknowledged only when durable.

Guarantees, and how each is kept:

* **Never lost.** A message is queued durably before any delivery; ``delivered``
  is written only after the target session durably holds it (flush, then
  check). Whatever fails in between leaves it queued, and recovery retries
  queued-minus-delivered whenever a member starts.
* **Never twice.** Before every attempt the target's own log is checked (pending
  inbox or history, :mod:`.holdings`); a message a loaded target already
  holds, or a sleeping target already recorded, is only acknowledged. A message
  only *pending* in a sleeping target's inbox (a crash after acceptance) is handed
  to the host again under the same id: the host does not queue it twice, and the
  cold resume makes the target work it off. One in-process dispatch per message id.
* **In order.** One chain per (Team, target): a dispatch first delivers every
  earlier pending message of that target, in durable queue order, and stops at
  the first failure, so later mail never overtakes earlier mail.
* **Not stalled by a failed flush.** A dispatch whose queued record could not be
  made durable is remembered; as soon as a later flush of the Lead log makes a
  Team change durable, it is dispatched again on its own (no second message or
  restart needed).

Delivery paths: the Lead gets ``lead.steer(message)``; a teammate gets the host's
host-only steer (``continuations.deliver(mode="steer")``), which cold-resumes it
when it is asleep on disk and keeps the Team source. Cross-process exactly-once
is not claimed (one process owns a Team).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from host_spec.events import EventType

from dsh_team.errors import TeamError, render_reason
from dsh_team.core.records import TEAM_MESSAGE_DELIVERED, VERSION, MessageDeliveredRecord
from dsh_team.core.snapshots import TeamMessageSnapshot
from dsh_team.log.journal import Append, Journal
from dsh_team.mail.framing import delivered_content, recorded_team_message, team_source, team_user_message
from dsh_team.mail.holdings import SessionMessages
from dsh_team.core.state import TeamState

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Agent, Host, Session
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.log.membership import MembershipResolver

__all__ = ["Dispatcher"]

log = structlog.get_logger(__name__)


def _settled(value: bool) -> asyncio.Future[bool]:
    future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


class Dispatcher:
    """Delivers, acknowledges and recovers queued Team mail for every Team of one service.

    Args:
        host: The host (``agents``, ``sessions``, ``continuations``, ``call_soon``).
        journals, members, lifecycle: The service's journal, membership and lifetime.
        messages: Session message indexes (target-side de-duplication).
    """

    def __init__(
        self,
        host: Host,
        journals: Journals,
        members: MembershipResolver,
        lifecycle: Lifecycle,
        messages: SessionMessages,
    ) -> None:
        self.host = host
        self.journals = journals
        self.members = members
        self.lifecycle = lifecycle
        self.messages = messages
        self._tails: dict[tuple[str, str], asyncio.Future[bool]] = {}
        self._inflight: dict[str, asyncio.Future[bool]] = {}
        #: Per Team: message id -> target id of dispatches stopped by a failed Lead flush.
        self._stalled: dict[str, dict[str, str]] = {}
        #: Whether a member shut down for good (set by the coordination): never woken for mail again.
        self.gone: Callable[[Journal, str], bool] = lambda journal, member_id: False

    # ------------------------------------------------------------ dispatch

    def dispatch(self, journal: Journal, message_id: str, target_id: str) -> asyncio.Future[bool]:
        """Join ``target_id``'s chain (synchronously); resolves ``True`` once the target holds it durably.

        A message already being dispatched gets the same future. After disposal the
        result is ``False`` at once (the message stays queued for the next start), and
        so it is for a message that is not open (unknown, or read already).
        """
        existing = self._inflight.get(message_id)
        if existing is not None:
            return existing
        if journal.state.mail.message(message_id) is None:
            return _settled(False)  # not open: never queued in this Team, or read already
        key = (journal.team_id, target_id)
        previous = self._tails.get(key)
        try:
            future = self.lifecycle.track(self._run(previous, journal, message_id, target_id))
        except TeamError:
            return _settled(False)
        self._tails[key] = self._inflight[message_id] = future

        def done(_: asyncio.Future[bool]) -> None:
            del self._inflight[message_id]  # nobody registers an id that is still in flight
            if self._tails.get(key) is future:
                del self._tails[key]

        future.add_done_callback(done)
        return future

    async def _run(
        self, previous: asyncio.Future[bool] | None, journal: Journal, message_id: str, target_id: str
    ) -> bool:
        if previous is not None:
            await asyncio.wait([previous])
        if self.lifecycle.disposed or journal.state.failure is not None:
            return False
        try:
            await journal.flush(f"team message {message_id}")  # queued is durable before any delivery
        except TeamError as exc:
            log.warning("team.message_remains_queued", message=message_id, error=render_reason(exc))
            self._stalled.setdefault(journal.team_id, {})[message_id] = target_id
            return False
        mail = journal.state.mail
        # The message was open when its dispatch began, so one the mailbox no longer holds
        # was read since: delivered.
        if mail.is_delivered(message_id):
            return True
        pending = mail.pending_for(target_id)
        upto = [message.id for message in pending].index(message_id) + 1
        for message in pending[:upto]:
            if not await self._deliver(journal, message):
                return False
        return True

    async def _deliver(self, journal: Journal, message: TeamMessageSnapshot) -> bool:
        """One delivery attempt; ``False`` leaves the message queued (the failure is logged)."""
        team_id, target_id = journal.team_id, message.target_id
        if self.gone(journal, target_id):
            log.info("team.message_remains_queued", message=message.id, target=target_id, error="the member shut down")
            return False
        root = self.host.agents.get(team_id)
        if root is None or root.session is not journal.session:
            log.warning("team.message_remains_queued", message=message.id, target=target_id, error="the Lead is not live")
            return False
        try:
            if target_id == team_id:
                if not self.messages.holds(root.session, message.id):
                    root.steer(team_user_message(team_id, message))
                return await self.acknowledge(journal, message)
            session = self.host.sessions.get(target_id)
            if session is not None:
                if self.messages.holds(session, message.id):
                    return await self.acknowledge(journal, message)
            else:
                stored = await self.host.sessions.inspect(target_id)
                if self.messages.stored(stored).recorded(message.id):
                    return await self._record(journal, message)
                # Not recorded, or only pending in a sleeping target's inbox: deliver. A
                # pending copy is not inserted twice (same id), and the cold resume wakes
                # the target to work it off: mail must reach the history, not only a disk.
            await self.host.continuations.deliver(
                root,
                target_id,
                delivered_content(message),
                source=team_source(team_id, message),
                mode="steer",
                message_id=message.id,
                signal=self.lifecycle.signal,
                notify=False,
            )
            return await self.acknowledge(journal, message)
        except Exception as exc:
            log.warning("team.message_remains_queued", message=message.id, target=target_id, error=render_reason(exc))
            return False

    def durable(self, journal: Journal) -> None:
        """A Team change of ``journal`` became durable: resume the dispatches a failed flush stopped.

        Scheduled through ``host.call_soon`` (counted as pending work, tracked for
        disposal) rather than run inside the flush notification.
        """
        stalled = self._stalled.pop(journal.team_id, None)
        if stalled is None:
            return
        for message_id, target_id in stalled.items():
            # After disposal, or for a replaced Lead session, the dispatch settles False
            # and the message stays queued for the next start.
            self.host.call_soon(functools.partial(self.dispatch, journal, message_id, target_id))

    # ------------------------------------------------------------ acknowledgement

    async def acknowledge(self, journal: Journal, message: TeamMessageSnapshot) -> bool:
        """Append ``delivered`` if the target *durably* holds the message; ``False`` if it does not.

        Raises:
            Exception: reading or flushing the target, or the Lead append/flush failed.
        """
        target_id = message.target_id
        session = journal.session if target_id == journal.team_id else self.host.sessions.get(target_id)
        if session is None:
            stored = await self.host.sessions.inspect(target_id)
            if not self.messages.stored(stored).holds(message.id):
                return False
            return await self._record(journal, message)
        while True:
            held = self.messages.holds(session, message.id)
            await session.flush()  # makes durable what was held before it began
            if not self.messages.holds(session, message.id):
                return False  # vanished (a discarded inbox item): it stays queued
            if held:
                return await self._record(journal, message)
            # it arrived during the flush: flush once more before acknowledging

    async def _record(self, journal: Journal, message: TeamMessageSnapshot) -> bool:
        def decide(state: TeamState) -> Append | None:
            # Not open any more (read, hence delivered), or open and delivered: nothing to record.
            open_ = state.mail.message(message.id)
            if open_ is None or open_.target_id != message.target_id or state.mail.is_delivered(message.id):
                return None
            record = MessageDeliveredRecord(
                version=VERSION, team_id=journal.team_id, message_id=message.id, target_id=message.target_id
            )
            return Append(TEAM_MESSAGE_DELIVERED, record)

        await journal.transact(decide, what=f"delivery of team message {message.id}")
        return True

    def observe(self, session: Session, event: Event) -> None:
        """A target recorded a Team message in its history: acknowledge it soon (tracked).

        Cheap for everything else: only ``user/message`` events with a Team source
        of a live Lead whose message is still undelivered schedule work.
        """
        if event.type != EventType.USER_MESSAGE or self.lifecycle.disposed:
            return
        found = recorded_team_message(event)
        if found is None:
            return
        team_id, message_id = found
        journal = self.journals.find(team_id)
        root = self.host.agents.get(team_id)
        if journal is None or root is None or root.session is not journal.session:
            return
        mail = journal.state.mail
        message = mail.message(message_id)
        if message is None or message.target_id != session.id or mail.is_delivered(message.id):
            return
        self.host.call_soon(lambda: self._acknowledge_soon(journal, message))

    def _acknowledge_soon(self, journal: Journal, message: TeamMessageSnapshot) -> asyncio.Future[bool] | None:
        if self.lifecycle.disposed:
            return None
        return self.lifecycle.track(self._acknowledge_observed(journal, message))

    async def _acknowledge_observed(self, journal: Journal, message: TeamMessageSnapshot) -> bool:
        try:
            return await self.acknowledge(journal, message)
        except Exception as exc:
            log.warning("team.acknowledgement_failed", message=message.id, error=render_reason(exc))
            return False

    # ------------------------------------------------------------ recovery

    async def recover(self, agent: Agent) -> int:
        """Re-dispatch the queued-minus-delivered mail a starting member is involved in.

        The Lead retries every pending message of its Team, a teammate the ones
        addressed to it; each target's mail goes in durable queue order.

        Returns:
            How many of them were delivered.
        """
        membership = self.members.try_resolve(agent)
        if membership is None:
            return 0
        journal = self.journals.get(membership.root.session)
        state = journal.state
        if state.failure is not None:
            return 0
        mail = state.mail
        pending = mail.all_pending() if membership.is_lead else mail.pending_for(agent.id)
        futures = [self.dispatch(journal, message.id, message.target_id) for message in pending]
        results = await asyncio.gather(*futures)
        return sum(results)
