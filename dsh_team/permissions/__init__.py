"""Permission asks of Team members: recorded in the Lead log, answered exactly once.

Modules: :mod:`.records` (``permission/requested``, ``permission/answered``),
:mod:`.ledger` (their pure fold, live per Lead), :mod:`.decide` (the one pure
decision every answerer goes through), :mod:`.routes` (the Team's
:class:`host_spec.permissions.PermissionRouter`: record, notify the Lead, wait, deadline).
"""

from dsh_team.permissions.decide import ANSWERS, AnswerCommand, PermissionLimits, RequestCommand, decide_permission
from dsh_team.permissions.ledger import Ask, LivePermissions, PermissionsState, fold_permissions, replay_permissions
from dsh_team.permissions.records import (
    PERMISSION_ANSWERED,
    PERMISSION_EVENT_TYPES,
    PERMISSION_REQUESTED,
    PERMISSIONS_VERSION,
    AnsweredRecord,
    RequestedRecord,
)
from dsh_team.permissions.routes import DEADLINE_REASON, PermissionRoutes, request_text

__all__ = [
    "ANSWERS",
    "AnswerCommand",
    "PermissionLimits",
    "RequestCommand",
    "decide_permission",
    "Ask",
    "LivePermissions",
    "PermissionsState",
    "fold_permissions",
    "replay_permissions",
    "PERMISSION_ANSWERED",
    "PERMISSION_EVENT_TYPES",
    "PERMISSION_REQUESTED",
    "PERMISSIONS_VERSION",
    "AnsweredRecord",
    "RequestedRecord",
    "DEADLINE_REASON",
    "PermissionRoutes",
    "request_text",
]
