"""The controls fold: gate runs and plan approval, a pure fold of the Lead log's controls records.

The live service, the invariant plugin, ``dsh team show``, the web panel and the
trace export all fold with :func:`fold_controls`, so what a running Team enforces
and what its logs show cannot disagree. Kept beside the Team state (like the cost
ledger), not inside it: these records change no roster, board or mailbox and do
not move the Team's wait position (the notices that go with them are Team mail,
which does).

Rules (a broken one makes the state ``failed``, terminal, which the views show and
the invariant refuses to append):

* a run starts once (``run_id`` new) and a task has at most one open run;
* a run finishes once, after it started;
* a member's plan approval starts with ``required``; ``submitted`` follows
  ``required``, ``rejected`` or an earlier submission (a revised plan); ``approved``
  and ``rejected`` follow a submission; nothing follows ``approved``.

A record of another Team is ignored; a malformed one or another version fails the fold.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import immutables
import msgspec
import structlog

from dsh_team.controls.records import (
    CONTROL_EVENT_TYPES,
    CONTROLS_VERSION,
    TEAM_CHECK_FINISHED,
    TEAM_CHECK_STARTED,
    CheckFinishedRecord,
    CheckStartedRecord,
    PlanAction,
    PlanRecord,
    decode_control,
)
from dsh_team.core.event_filter import of_types

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Session

__all__ = ["CheckRun", "PlanState", "ControlsState", "fold_controls", "replay_controls", "LiveControls"]

log = structlog.get_logger(__name__)

_EMPTY: Final[immutables.Map[Any, Any]] = immutables.Map()

#: The plan steps each step may follow (``None``: no plan record yet).
_FOLLOWS: Final[dict[PlanAction, frozenset[PlanAction | None]]] = {
    "required": frozenset({None}),
    "submitted": frozenset({"required", "rejected", "submitted"}),
    "approved": frozenset({"submitted"}),
    "rejected": frozenset({"submitted"}),
}


class CheckRun(msgspec.Struct, frozen=True, gc=False):
    """One gate run: its start (seq), and its finish once recorded."""

    started: CheckStartedRecord
    seq: int
    finished: CheckFinishedRecord | None = None
    finished_seq: int = 0

    @property
    def open(self) -> bool:
        """Started and never finished (a crash cut it, or it is running now)."""
        return self.finished is None


class PlanState(msgspec.Struct, frozen=True, gc=False):
    """A plan-gated member's approval: its last step, its latest plan and the last feedback.

    Attributes:
        member: The member's name.
        status: The last step (``approved``: its write tools are free).
        plan: The latest submitted plan (``""`` before the first).
        feedback: The text of the last decision.
        by: Who made the last step.
        seq: Lead-log seq of the last step.
        rounds: How many plans it submitted.
    """

    member: str
    status: PlanAction
    plan: str = ""
    feedback: str = ""
    by: str = ""
    seq: int = 0
    rounds: int = 0


class ControlsState(msgspec.Struct, frozen=True, gc=False):
    """Every gate run and plan approval of a Team, as of its last folded controls record.

    Attributes:
        team_id: The Lead session id.
        runs: run id -> :class:`CheckRun`.
        order: run ids in log order.
        open: task id -> id of its open run.
        plans: member name -> :class:`PlanState`.
        failure: Why the fold stopped (``None``: it did not).
    """

    team_id: str
    runs: immutables.Map[str, CheckRun] = _EMPTY
    order: tuple[str, ...] = ()
    open: immutables.Map[str, str] = _EMPTY
    plans: immutables.Map[str, PlanState] = _EMPTY
    failure: str | None = None

    def listed(self) -> tuple[CheckRun, ...]:
        """Every run in log order."""
        return tuple(self.runs[run_id] for run_id in self.order)

    def open_runs(self) -> tuple[CheckRun, ...]:
        """Runs started and never finished, in log order."""
        return tuple(run for run in self.listed() if run.open)

    def last_run(self, task_id: str) -> CheckRun | None:
        """The latest run of ``task_id`` (``None``: never run)."""
        for run_id in reversed(self.order):
            run = self.runs[run_id]
            if run.started.task_id == task_id:
                return run
        return None

    def plan(self, member: str) -> PlanState | None:
        """``member``'s plan approval (``None``: it needs none)."""
        return self.plans.get(member)

    def may_write(self, member: str) -> bool:
        """Whether ``member``'s write tools are free: it needs no plan approval, or its plan was approved."""
        plan = self.plans.get(member)
        return plan is None or plan.status == "approved"


def _fail(state: ControlsState, message: str, seq: int) -> ControlsState:
    return msgspec.structs.replace(state, failure=f"seq {seq}: {message}")


def _started(state: ControlsState, record: CheckStartedRecord, seq: int) -> ControlsState:
    if record.run_id in state.runs:
        return _fail(state, f"check run {record.run_id} started twice", seq)
    if record.task_id in state.open:
        return _fail(state, f"task {record.task_id} has an open check run already", seq)
    return msgspec.structs.replace(
        state,
        runs=state.runs.set(record.run_id, CheckRun(record, seq)),
        order=(*state.order, record.run_id),
        open=state.open.set(record.task_id, record.run_id),
    )


def _finished(state: ControlsState, record: CheckFinishedRecord, seq: int) -> ControlsState:
    run = state.runs.get(record.run_id)
    if run is None or not run.open:
        return _fail(state, f"check run {record.run_id} finished without being open", seq)
    return msgspec.structs.replace(
        state,
        runs=state.runs.set(record.run_id, msgspec.structs.replace(run, finished=record, finished_seq=seq)),
        open=state.open.delete(run.started.task_id),
    )


def _plan(state: ControlsState, record: PlanRecord, seq: int) -> ControlsState:
    previous = state.plans.get(record.member)
    status = None if previous is None else previous.status
    if status not in _FOLLOWS[record.action]:
        return _fail(state, f"plan of {record.member}: {record.action} cannot follow {status or 'nothing'}", seq)
    if previous is None:
        previous = PlanState(record.member, record.action)
    if record.action == "submitted":
        plan = msgspec.structs.replace(
            previous, status="submitted", plan=record.text, by=record.by, seq=seq, rounds=previous.rounds + 1
        )
    else:
        plan = msgspec.structs.replace(previous, status=record.action, feedback=record.text, by=record.by, seq=seq)
    return msgspec.structs.replace(state, plans=state.plans.set(record.member, plan))


def fold_controls(state: ControlsState, event: Event) -> ControlsState:
    """Fold one event (pure). Returns ``state`` itself when it is no controls record of this Team."""
    if state.failure is not None or event.type not in CONTROL_EVENT_TYPES:
        return state
    try:
        record = decode_control(event.type, event.data)
    except msgspec.DecodeError as exc:
        return _fail(state, f"invalid {event.type} payload ({exc})", event.seq)
    if record.team_id != state.team_id:
        return state
    if record.version != CONTROLS_VERSION:
        return _fail(state, f"unsupported {event.type} version {record.version}", event.seq)
    if event.type == TEAM_CHECK_STARTED:
        assert isinstance(record, CheckStartedRecord)
        return _started(state, record, event.seq)
    if event.type == TEAM_CHECK_FINISHED:
        assert isinstance(record, CheckFinishedRecord)
        return _finished(state, record, event.seq)
    assert isinstance(record, PlanRecord)
    return _plan(state, record, event.seq)


def replay_controls(events: Iterable[Event], team_id: str, state: ControlsState | None = None) -> ControlsState:
    """Fold a whole Lead log, or its tail after ``state``.

    For ``dsh team show`` and the trace export; the service folds incrementally.
    """
    state = ControlsState(team_id) if state is None else state
    for event in events:
        state = fold_controls(state, event)
    return state


class LiveControls:
    """The controls state of each live Lead session, folded incrementally (each event once, never a re-scan)."""

    def __init__(self) -> None:
        #: Lead session id -> (session object, events folded, state).
        self._by_id: dict[str, tuple[Session, int, ControlsState]] = {}

    def state(self, session: Session) -> ControlsState:
        """``session``'s controls state up to its last event; a new session object (a resume) is folded afresh."""
        entry = self._by_id.get(session.id)
        start, state = (entry[1], entry[2]) if entry is not None and entry[0] is session else (0, ControlsState(session.id))
        count = session.last_seq
        if start < count:
            before = state.failure
            # Only controls records fold; they are picked out in C (no Python step per other event).
            for event in of_types(session.events[start:count], CONTROL_EVENT_TYPES):
                state = fold_controls(state, event)
            self._by_id[session.id] = (session, count, state)
            if state.failure is not None and before is None:
                log.error("team.controls_failed", team=session.id, error=state.failure)
        return state

    def restore(self, session: Session, count: int, state: ControlsState) -> None:
        """Continue ``session``'s fold from ``state``, the fold of its first ``count`` events (a checked checkpoint)."""
        self._by_id[session.id] = (session, count, state)

    def forget(self, session: Session) -> None:
        """Drop ``session``'s state (it left the live store)."""
        entry = self._by_id.get(session.id)
        if entry is not None and entry[0] is session:
            del self._by_id[session.id]
