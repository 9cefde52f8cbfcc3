"""Crash repair: close a turn the previous process left open.

A crash can stop the loop anywhere inside a turn. Before a resumed agent does
anything else it appends closers so the log is balanced again and the model never
sees a tool call without a result: one error ``tool/result`` per unanswered call
(``TOOL_OUTCOME_UNKNOWN`` when its ``tool/call`` was recorded, so it may have run;
``TOOL_NOT_STARTED`` otherwise), ``step/end`` if a step is open, then
``turn/end {reason: {kind: interrupted}}``.

A call whose permission ask is open (``tool/permission`` ``asked``, never
``allowed``: :mod:`host_spec.permissions`) never ran, and a restart must not answer
it. Such a call is *held*: it gets no closer, its step and turn stay open, and the
resumed agent continues that turn by asking again (the router finds the recorded
request) and running the call once it is allowed (:func:`.loop.run_turn`).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import attrs

from host_spec.events import Cause, Event, EventType, StepMark, TurnEnd, TurnStart
from host_spec.permissions import TOOL_PERMISSION

from host_spec.host.agents.tools import error_result

if TYPE_CHECKING:
    from host_spec.protocols import Session

__all__ = ["LogState", "HeldCall", "fold_tail", "append_closers", "OUTCOME_UNKNOWN_TEXT", "NOT_STARTED_TEXT"]

OUTCOME_UNKNOWN_TEXT: Final = (
    "tool call outcome unknown: the host stopped while it ran; retry only read-only or "
    "idempotent work, otherwise verify its effect first"
)
NOT_STARTED_TEXT: Final = "tool call was not started before the host stopped; it may be retried"

_BOUNDARIES: Final = frozenset({EventType.TURN_START, EventType.TURN_END})
#: Events scanned one by one from the end before the search moves to C (a long log with no turns).
_NEAR: Final = 64
_TYPE: Final = operator.attrgetter("type")


@attrs.frozen
class HeldCall:
    """A recorded call of the open turn whose permission ask was open when the host stopped."""

    call_id: str
    name: str
    arguments: str


@attrs.define
class LogState:
    """Where a log stands: the last turn number and, if a turn is open, what is unanswered.

    Attributes:
        last_turn: Number of the newest ``turn/start`` (0 for none); new turns continue from it.
        open_turn: The open turn's number, or ``None`` for a balanced log.
        open_step: The open step's number, or ``None``.
        unanswered: ``(call_id, name, started)`` for each tool call of the open turn without
            a result, in model order; ``started`` means its ``tool/call`` was recorded.
        held: The unanswered calls whose permission ask is open (never run), in model order.
    """

    last_turn: int = 0
    open_turn: int | None = None
    open_step: int | None = None
    step: int = 0
    unanswered: list[tuple[str, str, bool]] = attrs.Factory(list)
    held: list[HeldCall] = attrs.Factory(list)


def _last_boundary(events: Sequence[Event], end: int) -> int:
    """Index of the newest turn boundary in ``events[: end + 1]`` (-1 for none), searched in C."""
    types = list(map(_TYPE, itertools.islice(iter(events), end + 1)))
    types.reverse()
    found = [end - types.index(kind) for kind in _BOUNDARIES if kind in types]
    return max(found, default=-1)


def fold_tail(events: Sequence[Event]) -> LogState:
    """Fold only the tail from the newest turn boundary: O(events since the last turn/start)."""
    index = len(events) - 1
    stop = max(-1, index - _NEAR)
    while index > stop and events[index].type not in _BOUNDARIES:
        index -= 1
    if index == stop and stop >= 0:
        index = _last_boundary(events, stop)
    if index < 0:
        return LogState()
    boundary = events[index]
    if boundary.type == EventType.TURN_END:
        return LogState(last_turn=boundary.decode(TurnEnd).turn)
    turn = boundary.decode(TurnStart).turn
    state = LogState(last_turn=turn, open_turn=turn)
    calls: dict[str, str] = {}
    started: dict[str, str] = {}
    asked: set[str] = set()
    for event in events[index + 1 :]:
        if event.type == EventType.STEP_START:
            state.open_step = state.step = event.decode(StepMark).step
        elif event.type == EventType.STEP_END:
            state.open_step = None
        elif event.type == EventType.ASSISTANT_MESSAGE:
            for block in event.value().get("content", ()):
                if block.get("type") == "tool-call":
                    calls[block["id"]] = block["name"]
        elif event.type == EventType.TOOL_CALL:
            value = event.value()
            started[value["call_id"]] = value.get("arguments") or ""
        elif event.type == EventType.TOOL_RESULT:
            calls.pop(event.value()["call_id"], None)
        elif event.type == TOOL_PERMISSION:
            mark = event.value()
            (asked.add if mark.get("phase") == "asked" else asked.discard)(mark.get("call_id"))
    held = {call_id for call_id in calls if call_id in asked and call_id in started}
    state.unanswered = [(call_id, name, call_id in started) for call_id, name in calls.items() if call_id not in held]
    state.held = [HeldCall(call_id, name, started[call_id]) for call_id, name in calls.items() if call_id in held]
    return state


def append_closers(session: Session, state: LogState, *, agent_id: str) -> int:
    """Append the closers for ``state``'s open turn; returns how many events were appended.

    With held calls only their unanswered siblings are closed: the step and turn stay open.
    """
    if state.open_turn is None:
        return 0
    cause = Cause(agent_id=agent_id)
    turn, count = state.open_turn, 0
    for call_id, name, started in state.unanswered:
        code, text = ("TOOL_OUTCOME_UNKNOWN", OUTCOME_UNKNOWN_TEXT) if started else ("TOOL_NOT_STARTED", NOT_STARTED_TEXT)
        result = error_result(call_id, name, code, text, turn=turn, step=state.step)
        session.append(EventType.TOOL_RESULT, result, cause=cause)
        count += 1
    state.unanswered = []
    if state.held:
        return count
    if state.open_step is not None:
        session.append(EventType.STEP_END, StepMark(turn=turn, step=state.open_step), cause=cause)
        count += 1
    session.append(EventType.TURN_END, TurnEnd(turn=turn, reason={"kind": "interrupted"}), cause=cause)
    state.open_turn = state.open_step = None
    return count + 1
