"""Cost per member and per task, live: every model call of a member charged once, durably.

How a charge is made (the durable, exact attribution rule):

1. The service observes every committed model call of a Team member (its
   ``assistant/message``, or a compaction's ``context/compacted``; O(1): only the
   ``usage`` is decoded). The task the call is charged to is read
   *then*, from the Lead's folded state (:func:`~dsh_team.cost.attribution.charged_task`).
2. Once the member's own log holds that event durably (its flush), the charge is
   appended to the Lead log as one ``team/cost`` record (member, own-log seq,
   spend, task) and the Lead log is flushed: a charge never names a call that a
   crash could still take back (the call would be replayed and charged then).
   The ledger folds it (:mod:`dsh_team.cost.ledger`); ``dsh team show`` folds the
   same records, so a live Team and its logs agree.
3. A crash can lose charges that were not durable yet. When a member starts
   again, what its own log holds beyond its last charge is charged once (one
   record, to the task it owns at that moment): rebuilt from the logs, never
   counted twice (a charge must advance its member's seq).

Budgets are checked against the ledger plus the charges observed and not yet
appended, so a refusal is exact; a charge that reaches a limit is followed by its
``team/budget`` record and the Lead's notice. Those checks live in the stateless
base class :class:`~dsh_team.cost.limits.CostLimits`; the charges themselves,
which run on every append and flush of a member's log, stay here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from host_spec.carry import LogMark

from dsh_team.config import BudgetConfig
from dsh_team.cost.attribution import call_spend, charged_task, own_tail, spend_after
from dsh_team.cost.budget import limited, notice_id
from dsh_team.cost.ledger import LiveLedgers
from dsh_team.cost.limits import CostLimits, PendingCharge
from dsh_team.cost.records import COST_VERSION, TEAM_COST, ChargeRecord
from dsh_team.errors import render_reason

if TYPE_CHECKING:
    from collections.abc import Callable

    from host_spec.events import Event
    from host_spec.protocols import Agent, Host, Session

    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.mail.holdings import SessionMessages
    from dsh_team.log.membership import Membership, MembershipResolver

__all__ = ["TeamCosts"]

log = structlog.get_logger(__name__)


class TeamCosts(CostLimits):
    """The live cost ledgers, charges and budget checks of one service (see the module docstring).

    Args:
        host: The service's host.
        budget: The configured limits.
        journals, members: The service's journals and membership.
        messages: Which messages a session holds (the notice's de-duplication).
        wake: Ends the current waits of a Team (its Lead reads the notice next).
    """

    def __init__(
        self,
        host: Host,
        budget: BudgetConfig,
        journals: Journals,
        members: MembershipResolver,
        messages: SessionMessages,
        wake: Callable[[str], None],
    ) -> None:
        self.host = host
        self.wake = wake
        self.budget = budget
        self.journals = journals
        self.members = members
        self.messages = messages
        self._limited = limited(budget)
        self._ledgers = LiveLedgers()
        self._pending = {}
        #: Member session id -> (its Team id, the last seq its own log holds durably), while it has pending charges.
        self._durable: dict[str, tuple[str, int]] = {}
        self._scheduled: set[str] = set()
        #: Member session id -> how far its log was scanned at its last start (one per member).
        self._scanned: dict[str, LogMark] = {}

    @property
    def ledgers(self) -> LiveLedgers:
        """The ledger of each live Lead session (the checkpoint captures and restores it)."""
        return self._ledgers

    # ------------------------------------------------------------ host feed (delegated by the service's hooks)

    def session_event(self, session: Session, event: Event) -> None:
        """Note the spend of a member's model call and the task it is charged to (appended soon)."""
        spend = call_spend(event)  # O(1): anything but a model call's event is refused by its type
        if spend is None:
            return
        found = self._member_of(session)
        if found is not None:
            membership, journal = found
            member_id = membership.member_id
            charge = PendingCharge(event.seq, spend, charged_task(journal.state, member_id))
            self._queue(journal, member_id, charge, session.durable_seq)

    def session_flushed(self, session: Session, durable_seq: int) -> None:
        """A member's log became durable up to ``durable_seq``: append the charges it now backs."""
        known = self._durable.get(session.id)
        if known is None:
            return
        team_id, _ = known
        self._durable[session.id] = (team_id, durable_seq)
        charges = self._pending.get(team_id, {}).get(session.id, ())
        journal = self.journals.find(team_id)
        if journal is not None and any(charge.seq <= durable_seq for charge in charges) and self.write(journal):
            self.host.call_soon(lambda: self._flush(journal))

    def agent_session_start(self, agent: Agent) -> None:
        """Charge what the member's log holds beyond its last charge; re-tell the Lead a lost notice."""
        found = self._member_of(agent.session)
        if found is None:
            return
        membership, journal = found
        member_id = membership.member_id
        ledger = self.ledger(journal)
        queued = [charge.seq for charge in self._pending.get(journal.team_id, {}).get(member_id, ())]
        after = max([ledger.last_charged(member_id), *queued])
        session = agent.session
        mark = self._scanned.get(session.id)
        if mark is not None and mark.continues(session.header, session.events):
            # This process already scanned (and queued) everything before its last start
            # of this log: a woken member is not re-read from the beginning.
            after = max(after, mark.position)
        spend, last = spend_after(own_tail(session, after), after)
        self._scanned[session.id] = LogMark.of(session.header, session.events, session.last_seq)
        if last:  # read from the loaded log: durable
            self._queue(journal, member_id, PendingCharge(last, spend, charged_task(journal.state, member_id)), last)
        if membership.is_lead:
            for seq, record in ledger.reached:
                if not self.messages.holds(journal.session, notice_id(journal.team_id, seq)):
                    self._notify(journal, journal.state, seq, record)

    def session_disposed(self, session: Session) -> None:
        """Forget a Lead session's ledger, and a member's charges its log never stored, when it leaves."""
        self._ledgers.forget(session)
        known = self._durable.pop(session.id, None)
        if known is not None:
            team_id, durable = known
            members = self._pending.get(team_id, {})
            kept = [charge for charge in members.pop(session.id, ()) if charge.seq <= durable]
            if kept:  # durable, waiting for their write
                members[session.id] = kept
                self._durable[session.id] = known

    # ------------------------------------------------------------ charges

    def _member_of(self, session: Session) -> tuple[Membership, Journal] | None:
        agent = self.host.agents.get(session.id)
        if agent is None or agent.session is not session:
            return None
        membership = self.members.try_resolve(agent)
        if membership is None:
            return None
        journal = self.journals.get(membership.root.session)
        return membership, journal

    def _queue(self, journal: Journal, member_id: str, charge: PendingCharge, durable: int) -> None:
        """Hold ``charge`` until the member's log holds it (``durable``: what it holds now)."""
        self._pending.setdefault(journal.team_id, {}).setdefault(member_id, []).append(charge)
        known = self._durable.get(member_id, (journal.team_id, 0))[1]
        self._durable[member_id] = (journal.team_id, max(known, durable))
        if charge.seq <= max(known, durable) and journal.team_id not in self._scheduled:
            self._scheduled.add(journal.team_id)
            self.host.call_soon(lambda: self._write_soon(journal))

    def _write_soon(self, journal: Journal) -> object:
        self._scheduled.discard(journal.team_id)
        # Written even while the service is disposed: the Lead's final flush stores them.
        return self._flush(journal) if self.write(journal) else None

    async def _flush(self, journal: Journal) -> None:
        try:
            await journal.session.flush()
        except Exception as exc:  # the records stay appended; the next flush retries them
            log.warning("team.cost_flush_failed", team=journal.team_id, error=render_reason(exc))

    def write(self, journal: Journal) -> bool:
        """Append the pending charges the members' logs hold, then record and tell each newly reached limit.

        Returns:
            Whether anything was appended.
        """
        members = self._pending.pop(journal.team_id, None)
        wrote = False
        try:
            ledger = self.ledger(journal)
            for member_id, charges in (members or {}).items():
                last = ledger.last_charged(member_id)
                durable = self._durable.get(member_id, ("", 0))[1]
                waiting = [charge for charge in charges if charge.seq > durable]
                if waiting:  # not stored by the member's log yet: kept for its flush
                    self._pending.setdefault(journal.team_id, {})[member_id] = waiting
                else:
                    self._durable.pop(member_id, None)
                for charge in sorted(charges, key=lambda item: item.seq):
                    if last < charge.seq <= durable:
                        record = ChargeRecord(
                            version=COST_VERSION, team_id=journal.team_id, member_id=member_id,
                            seq=charge.seq, spend=charge.spend, task_id=charge.task_id,
                        )  # fmt: skip
                        journal.session.append(TEAM_COST, record)
                        last, wrote = charge.seq, True
            return self._settle(journal) or wrote
        except Exception as exc:  # a closed Lead log: the next start charges from the logs
            log.warning("team.cost_write_failed", team=journal.team_id, error=render_reason(exc))
            return wrote
