"""Controls team users rely on: quality gates on the board and plan approval.

Modules: :mod:`.records` (``team/check/started``, ``team/check/finished``,
``team/plan``), :mod:`.ledger` (their pure fold, live per Lead), :mod:`.gates`
(running a completion's checks, recovering runs a crash cut), :mod:`.plans`
(plan approval and the write veto), :mod:`.operations` (the service's part).
"""

from dsh_team.controls.gates import Gates, check_steps, failure_text
from dsh_team.controls.ledger import CheckRun, ControlsState, LiveControls, PlanState, fold_controls, replay_controls
from dsh_team.controls.plans import GATED_TOOLS, PLAN_STEPS, Plans
from dsh_team.controls.records import (
    CONTROL_EVENT_TYPES,
    CONTROLS_VERSION,
    TEAM_CHECK_FINISHED,
    TEAM_CHECK_STARTED,
    TEAM_PLAN,
    CheckFinishedRecord,
    CheckResult,
    CheckStartedRecord,
    CheckStep,
    PlanRecord,
)

__all__ = [
    "Gates",
    "check_steps",
    "failure_text",
    "CheckRun",
    "ControlsState",
    "LiveControls",
    "PlanState",
    "fold_controls",
    "replay_controls",
    "GATED_TOOLS",
    "PLAN_STEPS",
    "Plans",
    "CONTROL_EVENT_TYPES",
    "CONTROLS_VERSION",
    "TEAM_CHECK_FINISHED",
    "TEAM_CHECK_STARTED",
    "TEAM_PLAN",
    "CheckFinishedRecord",
    "CheckResult",
    "CheckStartedRecord",
    "CheckStep",
    "PlanRecord",
]
