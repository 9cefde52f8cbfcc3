"""The pure Team core: durable records, the folded state, the one fold, the task DAG and board decisions.

Nothing here touches asyncio, a host or a file: every function is a value in, a value out,
so the service, the offline view and the invariant can share it and tests can drive it alone.

Modules: :mod:`.records` (the seven durable record types and their decoders), :mod:`.snapshots`
(the entity values records carry), :mod:`.content` (the shape of message content blocks),
:mod:`.state` (the immutable folded state), :mod:`.mailbox` (its open mail), :mod:`.persistent`
(the shared empty map and memo), :mod:`.fold_failure` (why a stream stopped folding),
:mod:`.fold` (``evolve``/``replay``), :mod:`.upcast` (older record versions),
:mod:`.changes` (where each entity last changed), :mod:`.delta` (the
delta of a cursor wait), :mod:`.dag` (the incremental dependency check), :mod:`.board` (task decisions),
:mod:`.task_actions` (the rule of each update action), :mod:`.actor` (who is asking),
:mod:`.task_view` (what a task looks like to readers), :mod:`.team_view` (what the browser
panel sees of a Team), :mod:`.targets` (a target name resolved against the roster),
:mod:`.event_filter` (a log's events picked by type), :mod:`.write_audit` (the write-scope
verdict), :mod:`.validation` (argument rules shared by decisions), :mod:`.quiescence`
(when a Team is quiet, what it leaves undone).
"""

from dsh_team.core.actor import Actor, Role
from dsh_team.core.board import decide_create, decide_update, require_task
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
    TEAM_QUIESCENT,
    TEAM_TASK,
    VERSION,
    MemberRecord,
    MessageDeliveredRecord,
    MessageReadRecord,
    MessageQueuedRecord,
    ModeRecord,
    QuiescentRecord,
    StalledTask,
    TaskRecord,
    TeamRecord,
    TeamStalled,
    decode_payload,
)
from dsh_team.core.snapshots import MemberPhase, TaskStatus, TeamMemberSnapshot, TeamMessageSnapshot, TeamTaskSnapshot
from dsh_team.core.quiescence import durably_quiet, may_record, stalled_work
from dsh_team.core.fold_failure import FoldFailure, FoldRule
from dsh_team.core.mailbox import Mailbox
from dsh_team.core.state import Board, Quiescence, Roster, TeamState, initial_state, mode_enabled
from dsh_team.core.task_actions import ACTIONS
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
    "TEAM_QUIESCENT",
    "TEAM_TASK",
    "VERSION",
    "MemberPhase",
    "MemberRecord",
    "MessageDeliveredRecord",
    "MessageReadRecord",
    "MessageQueuedRecord",
    "ModeRecord",
    "QuiescentRecord",
    "StalledTask",
    "TeamStalled",
    "durably_quiet",
    "may_record",
    "stalled_work",
    "Quiescence",
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
