"""The budgets that refuse model calls and spawns, and the Lead's notice of a reached limit.

Budgets (:class:`~dsh_team.config.BudgetConfig`) are checked before every model
call (the host's ``dsh_agent_pre_step`` seam) against the ledger plus the charges
not yet appended, so a refusal is exact; its ``team/budget`` record follows once
the charges that reach the limit are written. A reached limit refuses with
``TEAM_BUDGET_EXCEEDED``; nothing is claimed, so queued mail stays queued. It is
recorded once per limit value (``team/budget``) and the Lead is told once: a
user message whose id derives from the record, re-delivered at the Lead's start
only when its log does not hold it (a crash between record and notice). Telling
the Lead also ends its current ``wait_for_change``, so a parked Lead reads it.

:class:`CostLimits` is a part of :class:`dsh_team.cost.costs.TeamCosts`: it holds
no state of its own and works on the ledgers and pending charges that
``TeamCosts`` builds and keeps current (how a charge is made is described there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from dsh_team.config import BudgetConfig
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.cost.budget import budget_error, budget_record, first_reached, member_limit, notice, team_limit
from dsh_team.cost.ledger import NOTHING, CostLedger, LiveLedgers, limit_key
from dsh_team.cost.records import TEAM_BUDGET, BudgetRecord, Spend, added
from dsh_team.cost.report import MemberCost

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host, Session

    from dsh_team.core.state import TeamState
    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.log.membership import Membership

__all__ = ["PendingCharge", "CostLimits"]


class PendingCharge(NamedTuple):
    """A member's model call observed and not appended yet: its own-log seq, spend and charged task."""

    seq: int
    spend: Spend
    task_id: str | None


class CostLimits:
    """The ledger view, the budget checks and the Lead's notices of ``TeamCosts`` (a part of it).

    Attributes:
        host, budget, journals: The host, the configured limits and the journals (set by ``TeamCosts``).
        wake: Ends the Team's current waits, so a Lead parked in ``wait_for_change`` reads its notice.
    """

    host: Host
    wake: Callable[[str], None]
    budget: BudgetConfig
    journals: Journals
    _limited: bool
    _ledgers: LiveLedgers
    #: Team id -> member id -> charges observed and not yet appended.
    _pending: dict[str, dict[str, list[PendingCharge]]]

    if TYPE_CHECKING:  # the charges' own calls, which the checks use

        def _member_of(self, session: Session) -> tuple[Membership, Journal] | None: ...
        def write(self, journal: Journal) -> bool: ...

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

    # ------------------------------------------------------------ model calls (delegated by the service's hook)

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

    # ------------------------------------------------------------ limits reached

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
        self.wake(journal.team_id)
