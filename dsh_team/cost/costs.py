"""Cost per member and per task, live, and the budgets that refuse model calls.

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

Budgets (:class:`~dsh_team.config.BudgetConfig`) are checked before every model
call (the host's ``dsh_agent_pre_step`` seam) against the ledger plus the charges
not yet appended, so a refusal is exact; its ``team/budget`` record follows once
the charges that reach the limit are written. A reached limit refuses with
``TEAM_BUDGET_EXCEEDED``; nothing is claimed, so queued mail stays queued. It is
recorded once per limit value (``team/budget``) and the Lead is told once: a
user message whose id derives from the record, re-delivered at the Lead's start
only when its log does not hold it (a crash between record and notice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import structlog

from host_spec.carry import LogMark

from dsh_team.config import BudgetConfig
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.cost.attribution import call_spend, charged_task, own_tail, spend_after
from dsh_team.cost.budget import (
    budget_error,
    budget_record,
    first_reached,
    limited,
    member_limit,
    notice,
    notice_id,
    team_limit,
)
from dsh_team.cost.ledger import NOTHING, CostLedger, LiveLedgers, limit_key
from dsh_team.cost.records import COST_VERSION, TEAM_BUDGET, TEAM_COST, BudgetRecord, ChargeRecord, Spend, added
from dsh_team.cost.report import MemberCost
from dsh_team.errors import render_reason

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Agent, Host, Session

    from dsh_team.core.state import TeamState
    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.mail.holdings import SessionMessages
    from dsh_team.roster.membership import Membership, MembershipResolver

__all__ = ["TeamCosts"]

log = structlog.get_logger(__name__)


class _Charge(NamedTuple):
    seq: int
    spend: Spend
    task_id: str | None


class TeamCosts:
    """The live cost ledgers, charges and budget checks of one service (see the module docstring).

    Args:
        host: The service's host.
        budget: The configured limits.
        journals, members: The service's journals and membership.
        messages: Which messages a session holds (the notice's de-duplication).
    """

    def __init__(
        self,
        host: Host,
        budget: BudgetConfig,
        journals: Journals,
        members: MembershipResolver,
        messages: SessionMessages,
    ) -> None:
        self.host = host
        self.budget = budget
        self.journals = journals
        self.members = members
        self.messages = messages
        self._limited = limited(budget)
        self._ledgers = LiveLedgers()
        #: Team id -> member id -> charges observed and not yet appended.
        self._pending: dict[str, dict[str, list[_Charge]]] = {}
        #: Member session id -> (its Team id, the last seq its own log holds durably), while it has pending charges.
        self._durable: dict[str, tuple[str, int]] = {}
        self._scheduled: set[str] = set()
        #: Member session id -> how far its log was scanned at its last start (one per member).
        self._scanned: dict[str, LogMark] = {}

    # ------------------------------------------------------------ the ledger

    def ledger(self, journal: Journal) -> CostLedger:
        """The ledger of ``journal``'s Lead log, folded up to its last event (each event once)."""
        return self._ledgers.ledger(journal.session)

    def _unwritten(self, team_id: str, ledger: CostLedger, member_id: str | None = None) -> Spend:
        """Charges observed but not appended yet (of one member, or of the whole Team)."""
        total = NOTHING
        for pending_member, charges in self._pending.get(team_id, {}).items():
            if member_id is not None and pending_member != member_id:
                continue
            last = ledger.last_charged(pending_member)
            for charge in charges:
                if charge.seq > last:
                    total = added(total, charge.spend)
        return total

    def costs(self, journal: Journal) -> dict[str, MemberCost]:
        """Every charged member's spend (pending charges included) and whether a limit refuses it."""
        ledger = self.ledger(journal)
        team = added(ledger.team, self._unwritten(journal.team_id, ledger))
        ids = set(ledger.members) | set(self._pending.get(journal.team_id, {}))
        rows = {}
        for member_id in ids:
            spend = added(ledger.member(member_id), self._unwritten(journal.team_id, ledger, member_id))
            exceeded = self._limited and first_reached(self.budget, member_id, spend, team) is not None
            rows[member_id] = MemberCost(spend, exceeded)
        return rows

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
            charge = _Charge(event.seq, spend, charged_task(journal.state, member_id))
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
            self._queue(journal, member_id, _Charge(last, spend, charged_task(journal.state, member_id)), last)
        if membership.is_lead:
            for seq, record in ledger.reached:
                if not self.messages.holds(journal.session, notice_id(journal.team_id, seq)):
                    self._notify(journal, journal.state, seq, record)

    def agent_pre_step(self, agent: Agent) -> None:
        """Refuse a member's model call once a limit is reached (``TEAM_BUDGET_EXCEEDED``).

        Raises:
            TeamError: ``TEAM_BUDGET_EXCEEDED``.
        """
        if not self._limited:
            return
        found = self._member_of(agent.session)
        if found is None:
            return
        membership, journal = found
        ledger = self.ledger(journal)
        member_id = membership.member_id
        member, team = ledger.member(member_id), ledger.team
        if journal.team_id in self._pending:  # charges observed, not appended yet
            member = added(member, self._unwritten(journal.team_id, ledger, member_id))
            team = added(team, self._unwritten(journal.team_id, ledger))
        limit = first_reached(self.budget, member_id, member, team)
        if limit is not None:
            self.write(journal)  # the record and the Lead's notice, once
            raise budget_error(limit, membership.name)

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

    # ------------------------------------------------------------ spawns

    def require_spawn(self, membership: Membership) -> None:
        """Refuse a spawn once a Team limit is reached.

        Raises:
            TeamError: ``TEAM_BUDGET_EXCEEDED``.
        """
        if not self._limited:
            return
        journal = self.journals.get(membership.root.session)
        ledger = self.ledger(journal)
        limit = team_limit(self.budget, added(ledger.team, self._unwritten(journal.team_id, ledger)))
        if limit is not None:
            self.write(journal)
            raise budget_error(limit, LEAD_NAME)

    # ------------------------------------------------------------ charges and notices

    def _member_of(self, session: Session) -> tuple[Membership, Journal] | None:
        agent = self.host.agents.get(session.id)
        if agent is None or agent.session is not session:
            return None
        membership = self.members.try_resolve(agent)
        if membership is None:
            return None
        journal = self.journals.get(membership.root.session)
        return membership, journal

    def _queue(self, journal: Journal, member_id: str, charge: _Charge, durable: int) -> None:
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

    def _settle(self, journal: Journal) -> bool:
        """Record each limit reached for the first time (at its value) and tell the Lead."""
        if not self._limited:
            return False
        ledger = self.ledger(journal)
        state = journal.state
        ids = [journal.team_id, *(m.id for m in state.members.listed())]
        reached = [member_limit(self.budget, member_id, ledger.member(member_id)) for member_id in ids]
        reached.append(team_limit(self.budget, ledger.team))
        wrote = False
        for limit in reached:
            if limit is not None and limit_key(limit.member_id, limit.kind, limit.value) not in ledger.keys:
                journal.session.append(TEAM_BUDGET, budget_record(journal.team_id, limit))
                ledger = self.ledger(journal)
                self._notify(journal, state, ledger.reached[-1][0], ledger.reached[-1][1])
                wrote = True
        return wrote

    def _notify(self, journal: Journal, state: TeamState, seq: int, record: BudgetRecord) -> None:
        """Steer the Lead's notice of the budget record at ``seq`` (when the Lead is live)."""
        lead = self.host.agents.get(journal.team_id)
        if lead is None or lead.session is not journal.session:
            return  # re-told when the Lead starts
        member = state.members.members.get(record.member_id) if record.member_id is not None else None
        lead.steer(notice(journal.team_id, seq, record, member.name if member is not None else LEAD_NAME))
