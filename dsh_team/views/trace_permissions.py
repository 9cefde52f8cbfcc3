"""The permissions' part of ``dsh trace export``: each ask and its answer as a span event.

Folded with :func:`dsh_team.permissions.ledger.fold_permissions` (the fold every
reader of asks uses); a request becomes ``team.permission.requested`` and an
answer ``team.permission.answered``, on the span that appended it (the asking
member's tool call for a request, the Lead's ``send_message`` for its answer;
records with no such call, a deadline's or ``dsh team permit``'s, go to the Lead's
turn at that time). The call's arguments and the answer's reason are content:
exported only when the trace asks for it. A stream the fold refuses stops with one
``team.permissions.failed`` event.
"""

from __future__ import annotations

from host_spec.trace import SpanValues, TraceContext

from dsh_team.permissions.ledger import PermissionsState, fold_permissions
from dsh_team.permissions.records import PERMISSION_EVENT_TYPES, RequestedRecord, decode_permission

__all__ = ["contribute_permissions"]


def contribute_permissions(trace: TraceContext, team_id: str) -> None:
    """Add the permission events of the Team led by ``team_id``."""
    state = PermissionsState(team_id)
    content = trace.content
    for event in trace.own_events(team_id):
        if event.type not in PERMISSION_EVENT_TYPES:
            continue
        after = fold_permissions(state, event)
        if after.failure is not None:
            trace.add_event(trace.session_span(team_id), "team.permissions.failed", event.time,
                            {"dsh.team.permissions.failure": after.failure})  # fmt: skip
            return
        if after is state:  # another Team's record
            continue
        state = after
        record = decode_permission(event.type, event.data)
        values: SpanValues
        if isinstance(record, RequestedRecord):
            name, values = "team.permission.requested", {
                "dsh.team.permission.id": record.ask_id, "dsh.team.member.name": record.member,
                "dsh.team.permission.tool": record.tool, "dsh.team.permission.rule": record.rule,
                "dsh.team.permission.route": record.route, "dsh.team.permission.deadline": record.deadline,
                "dsh.team.permission.arguments": record.arguments if content else None,
            }
        else:
            name, values = "team.permission.answered", {
                "dsh.team.permission.id": record.ask_id, "dsh.team.permission.decision": record.decision,
                "dsh.team.permission.by": record.by, "dsh.team.permission.always": record.always,
                "dsh.team.permission.reason": record.reason if content else None,
            }
        trace.add_event(trace.anchor(team_id, event), name, event.time, values)
