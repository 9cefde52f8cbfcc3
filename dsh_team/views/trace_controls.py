"""The controls' part of ``dsh trace export``: each gate run and plan step as a span event.

Folded with :func:`dsh_team.controls.ledger.fold_controls` (the fold every reader
of the controls uses); each applied record becomes one event on the span that
appended it (the member's ``team_task_update`` or ``send_message`` call, found by
the record's cause; recovery's records go to the Lead's turn at that time). A
check's output tail and plan texts are content: exported only when the trace
asks for it. A stream the controls fold refuses stops with one
``team.controls.failed`` event.
"""

from __future__ import annotations

from host_spec.trace import SpanValues, TraceContext

from dsh_team.controls.ledger import ControlsState, fold_controls
from dsh_team.controls.records import CONTROL_EVENT_TYPES, CheckFinishedRecord, CheckStartedRecord, decode_control

__all__ = ["contribute_controls"]


def contribute_controls(trace: TraceContext, team_id: str) -> None:
    """Add the controls events of the Team led by ``team_id``."""
    state = ControlsState(team_id)
    content = trace.content
    for event in trace.own_events(team_id):
        if event.type not in CONTROL_EVENT_TYPES:
            continue
        after = fold_controls(state, event)
        if after.failure is not None:
            trace.add_event(trace.session_span(team_id), "team.controls.failed", event.time,
                            {"dsh.team.controls.failure": after.failure})
            return
        if after is state:  # another Team's record
            continue
        state = after
        record = decode_control(event.type, event.data)
        values: SpanValues
        if isinstance(record, CheckStartedRecord):
            name, values = "team.check.started", {
                "dsh.team.check.run": record.run_id, "dsh.team.task.id": record.task_id,
                "dsh.team.task.revision": record.revision, "dsh.team.member.name": record.member,
                "dsh.team.check.commands": [step.command for step in record.steps],
            }
        elif isinstance(record, CheckFinishedRecord):
            last = record.results[-1] if record.results else None
            name, values = "team.check.finished", {
                "dsh.team.check.run": record.run_id, "dsh.team.check.passed": record.passed,
                "dsh.team.check.rerun": record.rerun,
                "dsh.team.check.command": None if last is None else last.command,
                "dsh.team.check.exit_code": None if last is None else last.exit_code,
                "dsh.team.check.tail": last.tail if content and last is not None else None,
            }
        else:
            name, values = "team.plan", {
                "dsh.team.member.name": record.member, "dsh.team.plan.action": record.action,
                "dsh.team.plan.by": record.by, "dsh.team.plan.text": record.text if content else None,
            }
        trace.add_event(trace.anchor(team_id, event), name, event.time, values)
