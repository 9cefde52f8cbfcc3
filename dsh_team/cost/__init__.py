"""Cost per member and per task, and budgets.

Modules: :mod:`.records` (``team/cost`` charges and ``team/budget`` limits reached),
:mod:`.ledger` (their pure fold), :mod:`.attribution` (which spend a model call is
and which task it is charged to), :mod:`.budget` (which limit a spend reached),
:mod:`.costs` (the live charges), :mod:`.limits` (the refusal of model calls and
spawns, the Lead's notice), :mod:`.report` (the cost section of ``dsh team show`` and the web panel).
"""

from dsh_team.cost.attribution import call_spend, charged_task, spend_after
from dsh_team.cost.budget import BUDGET_SOURCE, Limit, first_reached, member_limit, notice_id, team_limit
from dsh_team.cost.costs import TeamCosts
from dsh_team.cost.report import MemberCost
from dsh_team.cost.ledger import CostLedger, fold_cost, replay_costs
from dsh_team.cost.records import COST_EVENT_TYPES, TEAM_BUDGET, TEAM_COST, BudgetRecord, ChargeRecord, Spend

__all__ = [
    "call_spend",
    "charged_task",
    "spend_after",
    "Limit",
    "first_reached",
    "member_limit",
    "team_limit",
    "BUDGET_SOURCE",
    "MemberCost",
    "TeamCosts",
    "notice_id",
    "CostLedger",
    "fold_cost",
    "replay_costs",
    "COST_EVENT_TYPES",
    "TEAM_BUDGET",
    "TEAM_COST",
    "BudgetRecord",
    "ChargeRecord",
    "Spend",
]
