"""dsh_team: durable Agent Teams for a ``host_spec`` host (the ``dsh-team`` plugin's domain).

This module is the public surface; import from here (or from a room package:
:mod:`dsh_team.core`, :mod:`dsh_team.log`, :mod:`dsh_team.roster`,
:mod:`dsh_team.mail`, :mod:`dsh_team.views`). ``docs/architecture.md`` maps the rooms.
:mod:`dsh_team.web` is the optional browser panel (plugin ``dsh-team-web``, extra
``web``); it is not part of this surface and nothing here imports it.

* the service: :class:`TeamServiceAPI` (what callers may rely on and look up
  with ``host.service(TeamServiceAPI)``), its implementation :class:`TeamService`,
  and the result types of its operations;
* configuration: :class:`TeamConfig`;
* errors: :class:`TeamError` with a stable code from :class:`TeamCode`;
* durable records: the seven ``team/*`` event types and their payload Structs;
* the fold: :func:`evolve` / :func:`replay` over :class:`TeamState`;
* the controls fold (quality-gate runs, plan approval): :func:`fold_controls` /
  :func:`replay_controls` over :class:`ControlsState`, :class:`LiveControls`.
* checkpoints (:mod:`dsh_team.checkpoint`): :class:`TeamCheckpoint`,
  :class:`CheckpointSource` (a plugin that read it already) and :func:`load_checked`, the one reader that trusts a checkpoint only when the log confirms it;
* Permission asks (:mod:`dsh_team.permissions`): :func:`fold_permissions`,
  :func:`replay_permissions` over :class:`PermissionsState`, :class:`LivePermissions`.
"""

from dsh_team.api import TeamServiceAPI
from dsh_team.checkpoint import CheckpointSource, TeamCheckpoint, load_checked
from dsh_team.config import MAX_SAFE_INTEGER, BudgetConfig, TeamConfig
from dsh_team.controls import CONTROL_EVENT_TYPES, ControlsState, LiveControls, fold_controls, replay_controls
from dsh_team.permissions import (
    PERMISSION_EVENT_TYPES,
    LivePermissions,
    PermissionsState,
    fold_permissions,
    replay_permissions,
)
from dsh_team.cost import MemberCost, Spend
from dsh_team.core import (
    LEAD_NAME,
    TEAM_EVENT_TYPES,
    TEAM_MEMBER,
    TEAM_MESSAGE_DELIVERED,
    TEAM_MESSAGE_READ,
    TEAM_MESSAGE_QUEUED,
    TEAM_MODE,
    TEAM_QUIESCENT,
    TEAM_TASK,
    VERSION,
    Board,
    FoldFailure,
    FoldRule,
    Mailbox,
    MemberPhase,
    MemberRecord,
    MessageDeliveredRecord,
    MessageReadRecord,
    MessageQueuedRecord,
    ModeRecord,
    Quiescence,
    QuiescentRecord,
    Roster,
    StalledTask,
    TaskRecord,
    TaskStatus,
    TaskView,
    TeamMemberSnapshot,
    TeamMessageSnapshot,
    TeamRecord,
    TeamStalled,
    TeamState,
    TeamDelta,
    TeamTaskSnapshot,
    evolve,
    initial_state,
    mode_enabled,
    replay,
)
from dsh_team.errors import TeamCode, TeamConfigError, TeamError, UnconfirmedError
from dsh_team.log import WAIT_MAX_MS, WAIT_MIN_MS, Membership, TeamFolds, WaitResult, check_since
from dsh_team.mail import SendResult
from dsh_team.roster import SIDE_RECORD_TYPES, InterruptResult, MemberView, side_record_failure
from dsh_team.service import TeamService
from dsh_team.views import TeamView

__all__ = [
    "CheckpointSource",
    "TeamCheckpoint",
    "load_checked",
    "CONTROL_EVENT_TYPES",
    "SIDE_RECORD_TYPES",
    "side_record_failure",
    "ControlsState",
    "LiveControls",
    "PERMISSION_EVENT_TYPES",
    "LivePermissions",
    "PermissionsState",
    "fold_permissions",
    "replay_permissions",
    "fold_controls",
    "replay_controls",
    "TeamServiceAPI",
    "TeamFolds",
    "FoldFailure",
    "FoldRule",
    "TeamService",
    "TeamConfig",
    "BudgetConfig",
    "MemberCost",
    "Spend",
    "MAX_SAFE_INTEGER",
    "TeamCode",
    "TeamError",
    "TeamConfigError",
    "UnconfirmedError",
    "Membership",
    "MemberView",
    "InterruptResult",
    "SendResult",
    "WaitResult",
    "TeamDelta",
    "WAIT_MIN_MS",
    "WAIT_MAX_MS",
    "check_since",
    "TaskView",
    "TeamView",
    "LEAD_NAME",
    "VERSION",
    "TEAM_EVENT_TYPES",
    "TEAM_MEMBER",
    "TEAM_TASK",
    "TEAM_MESSAGE_QUEUED",
    "TEAM_MESSAGE_DELIVERED",
    "TEAM_MESSAGE_READ",
    "TEAM_MODE",
    "TEAM_QUIESCENT",
    "MemberPhase",
    "TaskStatus",
    "TeamMemberSnapshot",
    "TeamTaskSnapshot",
    "TeamMessageSnapshot",
    "MemberRecord",
    "TaskRecord",
    "MessageQueuedRecord",
    "MessageDeliveredRecord",
    "MessageReadRecord",
    "ModeRecord",
    "QuiescentRecord",
    "Quiescence",
    "StalledTask",
    "TeamStalled",
    "TeamRecord",
    "TeamState",
    "Roster",
    "Board",
    "Mailbox",
    "initial_state",
    "mode_enabled",
    "evolve",
    "replay",
]
