"""The pure Team core: durable records, the folded state, the one fold, the task DAG and board decisions.

Nothing here touches asyncio, a host or a file: every function is a value in, a value out,
so the service, the offline view and the invariant can share it and tests can drive it alone.

Modules: :mod:`.records` (the six durable record types and their decoders),
:mod:`.state` (the immutable folded state), :mod:`.fold` (``evolve``/``replay``), :mod:`.upcast` (older record versions),
:mod:`.changes` (where each entity last changed), :mod:`.delta` (the
delta of a cursor wait), :mod:`.dag` (the incremental dependency check), :mod:`.board` (task decisions),
:mod:`.task_view` (what a task looks like to readers), :mod:`.validation`
(argument rules shared by decisions).
"""

from dsh_team.core.board import ACTIONS, Actor, Role, decide_create, decide_update, require_task
from dsh_team.core.delta import DELTA_CAP, MailChange, MemberChange, SentChange, TaskChange, TeamDelta, team_delta
from dsh_team.core.dag import DagViolation, check_candidate
from dsh_team.core.fold import evolve, replay
from dsh_team.core.records import (
    TEAM_EVENT_TYPES,
    TEAM_MEMBER,
    TEAM_MESSAGE_DELIVERED,
    TEAM_MESSAGE_READ,
    TEAM_MESSAGE_QUEUED,
    TEAM_MODE,
    TEAM_TASK,
    VERSION,
    MemberPhase,
    MemberRecord,
    MessageDeliveredRecord,
    MessageReadRecord,
    MessageQueuedRecord,
    ModeRecord,
    TaskRecord,
    TaskStatus,
    TeamMemberSnapshot,
    TeamMessageSnapshot,
    TeamRecord,
    TeamTaskSnapshot,
    decode_payload,
)
from dsh_team.core.state import Board, FoldFailure, FoldRule, Mailbox, Roster, TeamState, initial_state, mode_enabled
from dsh_team.core.task_view import LEAD_NAME, TaskView, list_views, task_view
from dsh_team.core.validation import check_content

__all__ = [
    "ACTIONS",
    "Actor",
    "Role",
    "decide_create",
    "decide_update",
    "require_task",
    "DagViolation",
    "DELTA_CAP",
    "MailChange",
    "MemberChange",
    "SentChange",
    "TaskChange",
    "TeamDelta",
    "team_delta",
    "check_candidate",
    "evolve",
    "replay",
    "TEAM_EVENT_TYPES",
    "TEAM_MEMBER",
    "TEAM_MESSAGE_DELIVERED",
    "TEAM_MESSAGE_READ",
    "TEAM_MESSAGE_QUEUED",
    "TEAM_MODE",
    "TEAM_TASK",
    "VERSION",
    "MemberPhase",
    "MemberRecord",
    "MessageDeliveredRecord",
    "MessageReadRecord",
    "MessageQueuedRecord",
    "ModeRecord",
    "TaskRecord",
    "TaskStatus",
    "TeamMemberSnapshot",
    "TeamMessageSnapshot",
    "TeamRecord",
    "TeamTaskSnapshot",
    "decode_payload",
    "Board",
    "FoldFailure",
    "FoldRule",
    "Mailbox",
    "Roster",
    "TeamState",
    "initial_state",
    "mode_enabled",
    "LEAD_NAME",
    "TaskView",
    "list_views",
    "task_view",
    "check_content",
]
