"""The Team's part of ``dsh trace export``: its records as span events, and a link from each send to its reading turn.

The host exports sessions, turns, model calls and tool calls
(:mod:`host_spec.trace_export`); this contributor (entry point ``dsh.trace``)
adds what only the Team knows. A Lead log's Team records are folded with
:func:`dsh_team.core.fold.evolve`, the fold every reader of a Team uses, and
each record the fold applied becomes one span event on the span that appended it
(the member's ``spawn_teammate``, ``send_message`` or ``team_task_update`` call,
found by the record's cause; a record without a call goes to the member's turn
at that time). A stream that breaks the fold stops there with one
``team.stream.failed`` event, as ``dsh team show`` stops at the last valid state.

Read receipts become links: for each ``team/message/read`` record, the send's
span gets a link to the target's turn whose model step first completed with the
message in its context (found in the target's own log by the rule read receipts
are decided by), and that turn gets the ``team.message.read`` event. Gate runs
and plan steps are added by :mod:`dsh_team.views.trace_controls`, permission asks and
answers by :mod:`dsh_team.views.trace_permissions`.

Members' session spans are labelled with their Team name and role. Message
text, task subjects and descriptions, member descriptions and provisioning
errors are content: exported only when the trace asks for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from host_spec.events import Event, EventType
from host_spec.messages import message_text
from host_spec.otlp import AttributeValue
from host_spec.trace import SpanRef, TraceContext

from dsh_team.core.fold import evolve
from dsh_team.core.records import (
    TEAM_EVENT_TYPES, VERSION, MemberRecord, MessageDeliveredRecord, MessageQueuedRecord, MessageReadRecord,
    ModeRecord, QuiescentRecord, TaskRecord, TeamRecord, decode_payload,
)
from dsh_team.core.state import TeamState, initial_state
from dsh_team.core.upcast import decode_older
from dsh_team.mail.framing import recorded_team_message
from dsh_team.views.trace_controls import contribute_controls
from dsh_team.views.trace_permissions import contribute_permissions

__all__ = ["LEAD_NAME", "contribute"]

#: The Team name of the Lead.
LEAD_NAME: Final = "lead"


def contribute(trace: TraceContext) -> None:
    """Add the Team events and receipt links of every Team led by a session of the run."""
    for session_id in trace.session_ids:
        records = [event for event in trace.own_events(session_id) if event.type in TEAM_EVENT_TYPES]
        if records:
            _TeamTrace(trace, session_id).add(records)
        contribute_controls(trace, session_id)
        contribute_permissions(trace, session_id)


def _record(event: Event) -> TeamRecord:
    """The record the fold just applied (current or upcast from an older version)."""
    try:
        record: TeamRecord = decode_payload(event.type, event.data)
    except msgspec.DecodeError:
        return decode_older(event.type, event.data)
    return record if record.version == VERSION else decode_older(event.type, event.data)


class _TeamTrace:
    """One Team's contribution."""

    def __init__(self, trace: TraceContext, team_id: str) -> None:
        self.trace = trace
        self.team_id = team_id
        self.state = initial_state(team_id)
        #: Whether a record of this Team was applied (its session is then labelled the Lead's).
        self.led = False
        #: Team message id -> the span of its send.
        self.sends: dict[str, SpanRef] = {}
        #: target session id -> {Team message id -> (reading turn, time of the reading step)}.
        self.readings: dict[str, dict[str, tuple[SpanRef, int]]] = {}

    def name(self, member_id: str, state: TeamState) -> str:
        """A member's Team name; an id the roster does not list (the fold does not require it) stays an id."""
        member = state.members.members.get(member_id)
        return LEAD_NAME if member_id == self.team_id else member_id if member is None else member.name

    def add(self, records: Sequence[Event]) -> None:
        trace = self.trace
        for event in records:
            after = evolve(self.state, event)
            if after.failure is not None:
                failure = after.failure
                trace.add_event(trace.session_span(self.team_id), "team.stream.failed", event.time,
                                {"dsh.team.fold.rule": failure.rule, "dsh.team.fold.seq": failure.seq})
                return
            if after is not self.state:
                if not self.led:  # the first record of this Team: its session is the Lead's
                    self.led = True
                    trace.add_attributes(trace.session_span(self.team_id), {
                        "dsh.team.id": self.team_id, "dsh.team.role": "lead", "dsh.team.member.name": LEAD_NAME,
                    })
                self.applied(event, _record(event), after)
                self.state = after

    def applied(self, event: Event, record: TeamRecord, state: TeamState) -> None:
        trace, content = self.trace, self.trace.content
        span = trace.anchor(self.team_id, event)
        values: dict[str, AttributeValue | None]
        if isinstance(record, MemberRecord):
            member = record.member
            name, values = "team.member", {
                "dsh.team.member.id": member.id, "dsh.team.member.name": member.name,
                "dsh.team.member.phase": member.phase, "dsh.team.member.context": member.context,
                "dsh.team.member.provider": member.provider,
                "dsh.team.member.description": member.description if content else None,
                "dsh.team.member.error": member.error if content else None,
            }
            if member.id in trace.session_ids:
                trace.add_attributes(trace.session_span(member.id), {
                    "dsh.team.id": self.team_id, "dsh.team.role": "teammate", "dsh.team.member.name": member.name,
                })
        elif isinstance(record, TaskRecord):
            task = record.task
            name, values = "team.task", {
                "dsh.team.task.id": task.id, "dsh.team.task.revision": task.revision,
                "dsh.team.task.status": task.status,
                "dsh.team.task.owner": None if task.owner_id is None else self.name(task.owner_id, state),
                "dsh.team.task.blocked_by": list(task.blocked_by) or None,
                "dsh.team.task.subject": task.subject if content else None,
                "dsh.team.task.description": task.description if content else None,
            }
        elif isinstance(record, MessageQueuedRecord):
            message = record.message
            self.sends[message.id] = span
            name, values = "team.message.sent", {
                "dsh.team.message.id": message.id, "dsh.team.message.sender": message.sender_name,
                "dsh.team.message.target": self.name(message.target_id, state),
                "dsh.team.message.content": message_text(list(message.content)) if content else None,
            }
        elif isinstance(record, (MessageDeliveredRecord, MessageReadRecord)):
            values = {"dsh.team.message.id": record.message_id,
                      "dsh.team.message.target": self.name(record.target_id, state)}
            if isinstance(record, MessageReadRecord):
                self.read(event, record, values)
                return
            name = "team.message.delivered"
        elif isinstance(record, QuiescentRecord):
            stalled = record.stalled
            name, values = "team.quiescent", {
                "dsh.team.stalled.in_progress": [task.id for task in stalled.in_progress] or None,
                "dsh.team.stalled.ready": list(stalled.ready) or None,
                "dsh.team.stalled.failed": [self.name(member_id, state) for member_id in stalled.failed] or None,
            }
        else:
            assert isinstance(record, ModeRecord)
            name, values = "team.mode", {"dsh.team.mode.enabled": record.enabled}
        trace.add_event(span, name, event.time, values)

    def read(self, event: Event, record: MessageReadRecord, values: dict[str, AttributeValue | None]) -> None:
        """The read event on the reading turn, and the send's link to it."""
        trace = self.trace
        reading = self.reading_turns(record.target_id).get(record.message_id)
        if reading is None:  # the target's log is not part of the export, or lost the reading step
            trace.add_event(trace.anchor(self.team_id, event), "team.message.read", event.time, values)
            return
        turn, time = reading
        trace.add_event(turn, "team.message.read", time, values)
        # The fold admits a receipt only for a queued message, so its send is known.
        link = {"dsh.link": "team.message.read", "dsh.team.message.id": record.message_id}
        trace.add_link(self.sends[record.message_id], turn, link)

    def reading_turns(self, target_id: str) -> dict[str, tuple[SpanRef, int]]:
        """Team message id -> the turn of ``target_id`` whose step first completed with it, and that step's time."""
        found = self.readings.get(target_id)
        if found is not None:
            return found
        found = self.readings[target_id] = {}
        if target_id not in self.trace.session_ids:
            return found
        seen: list[str] = []
        for event in self.trace.own_events(target_id):
            if event.type == EventType.USER_MESSAGE:
                recorded = recorded_team_message(event)
                if recorded is not None and recorded[0] == self.team_id:
                    seen.append(recorded[1])
            elif event.type == EventType.ASSISTANT_MESSAGE:
                turn = self.trace.turn_span(target_id, event.seq)
                if turn is not None:  # a reply outside any turn is no model step of this host
                    for message_id in seen:
                        found.setdefault(message_id, (turn, event.time))
                seen = []
        return found
