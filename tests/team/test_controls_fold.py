"""The controls fold: strict records, its rules as failures, the live incremental fold, and the invariant's veto.

Oracle: a naive list-based model of runs and plan steps written independently
(:func:`naive`), compared with the fold on random sequences of records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_team.controls import (
    CONTROLS_VERSION, TEAM_CHECK_FINISHED, TEAM_CHECK_STARTED, TEAM_PLAN, CheckFinishedRecord, CheckStartedRecord,
    CheckStep, ControlsState, LiveControls, PlanRecord, fold_controls, replay_controls,
)
from dsh_team.controls.records import decode_control
from host_spec.errors import InvariantError
from host_spec.events import Event

from controls_kit import lead_in, open_host, workspace

TEAM = "lead"


def event(seq: int, kind: str, payload: Any) -> Event:
    return Event(seq=seq, time=0.0, type=kind, data=msgspec.Raw(msgspec.json.encode(payload)))


def started(run: str, task: str = "task-1", team: str = TEAM, version: int = CONTROLS_VERSION) -> CheckStartedRecord:
    return CheckStartedRecord(version=version, team_id=team, run_id=run, task_id=task, revision=2, member="builder",
                              steps=(CheckStep(command="true"),))


def finished(run: str, passed: bool = True) -> CheckFinishedRecord:
    return CheckFinishedRecord(version=CONTROLS_VERSION, team_id=TEAM, run_id=run, passed=passed, results=())


def plan(action: str, member: str = "planner", text: str = "") -> PlanRecord:
    return PlanRecord(version=CONTROLS_VERSION, team_id=TEAM, member=member, action=action, by="lead",  # type: ignore[arg-type]
                      text=text)


KINDS = {CheckStartedRecord: TEAM_CHECK_STARTED, CheckFinishedRecord: TEAM_CHECK_FINISHED, PlanRecord: TEAM_PLAN}


def fold(*records: Any) -> ControlsState:
    return replay_controls([event(i, KINDS[type(r)], r) for i, r in enumerate(records, 1)], TEAM)


class TestRules:
    def test_runs_and_plans_fold(self) -> None:
        state = fold(started("r1"), finished("r1", False), started("r2"), plan("required"), plan("submitted", text="p"),
                     plan("rejected", text="no"), plan("submitted", text="p2"), plan("approved"))
        assert state.failure is None and [r.started.run_id for r in state.listed()] == ["r1", "r2"]
        assert [r.started.run_id for r in state.open_runs()] == ["r2"] and state.open["task-1"] == "r2"
        assert state.last_run("task-1") is state.runs["r2"] and state.last_run("task-9") is None
        planned = state.plan("planner")
        assert planned is not None and (planned.status, planned.plan, planned.feedback, planned.rounds) == (
            "approved", "p2", "", 2)
        assert state.may_write("planner") and state.may_write("anyone")
        assert not fold(plan("required")).may_write("planner")

    @pytest.mark.parametrize(
        ("records", "message"),
        [
            ((started("r1"), finished("r1"), started("r1")), "started twice"),
            ((started("r1"), started("r2")), "open check run already"),
            ((finished("r1"),), "without being open"),
            ((started("r1"), finished("r1"), finished("r1")), "without being open"),
            ((plan("submitted"),), "submitted cannot follow nothing"),
            ((plan("required"), plan("required")), "required cannot follow required"),
            ((plan("required"), plan("approved")), "approved cannot follow required"),
            ((plan("required"), plan("submitted"), plan("approved"), plan("submitted")), "cannot follow approved"),
        ],
    )
    def test_a_broken_rule_fails_the_fold_for_good(self, records: tuple[Any, ...], message: str) -> None:
        state = fold(*records)
        assert state.failure is not None and message in state.failure
        assert fold_controls(state, event(99, TEAM_PLAN, plan("required", "x"))) is state  # terminal

    def test_other_teams_other_types_and_bad_payloads(self) -> None:
        state = ControlsState(TEAM)
        assert fold_controls(state, event(1, TEAM_CHECK_STARTED, started("r", team="other"))) is state
        assert fold_controls(state, event(1, "team/task", {"x": 1})) is state
        bad = fold_controls(state, event(3, TEAM_PLAN, {"version": 1, "team_id": TEAM, "member": "m", "action": "x",
                                                       "by": "lead"}))
        assert bad.failure is not None and bad.failure.startswith("seq 3: invalid team/plan payload")
        future = fold_controls(state, event(4, TEAM_CHECK_STARTED, started("r", version=2)))
        assert future.failure == "seq 4: unsupported team/check/started version 2"

    def test_records_are_strict(self) -> None:
        payload = msgspec.json.encode({**msgspec.structs.asdict(plan("required")), "extra": 1})
        with pytest.raises(msgspec.ValidationError):
            decode_control(TEAM_PLAN, payload)
        with pytest.raises(KeyError):
            decode_control("team/task", b"{}")


def naive(records: list[Any]) -> tuple[bool, list[str], dict[str, str]]:
    """An independent model: (still valid, open run ids, plan status per member)."""
    runs: dict[str, bool] = {}
    open_tasks: dict[str, str] = {}
    plans: dict[str, str] = {}
    follows = {"required": [None], "submitted": ["required", "rejected", "submitted"], "approved": ["submitted"],
               "rejected": ["submitted"]}
    for record in records:
        if isinstance(record, CheckStartedRecord):
            if record.run_id in runs or record.task_id in open_tasks:
                return False, [], {}
            runs[record.run_id] = True
            open_tasks[record.task_id] = record.run_id
        elif isinstance(record, CheckFinishedRecord):
            if not runs.get(record.run_id):
                return False, [], {}
            runs[record.run_id] = False
            open_tasks = {t: r for t, r in open_tasks.items() if r != record.run_id}
        else:
            if plans.get(record.member) not in follows[record.action]:
                return False, [], {}
            plans[record.member] = record.action
    return True, [r for r, is_open in runs.items() if is_open], plans


RECORD = st.one_of(
    st.builds(lambda r, t: started(f"r{r}", f"task-{t}"), st.integers(0, 3), st.integers(0, 2)),
    st.builds(lambda r: finished(f"r{r}"), st.integers(0, 3)),
    st.builds(lambda a, m: plan(a, f"m{m}"), st.sampled_from(["required", "submitted", "approved", "rejected"]),
              st.integers(0, 1)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, max_size=12))
def test_the_fold_agrees_with_the_naive_model(records: list[Any]) -> None:
    valid, open_runs, plans = naive(records)
    state = fold(*records)
    assert (state.failure is None) == valid
    if valid:
        assert [r.started.run_id for r in state.open_runs()] == open_runs
        assert {name: p.status for name, p in state.plans.items()} == plans


class TestLive:
    async def test_incremental_fold_and_the_invariants_veto(self, tmp_path: Path) -> None:
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, workspace(tmp_path))
            live = LiveControls()
            session = lead.session
            assert live.state(session).runs == ControlsState(TEAM).runs
            session.append(TEAM_CHECK_STARTED, started("r1"))
            first = live.state(session)
            assert list(first.runs) == ["r1"] and live.state(session) is first  # nothing new: the same state
            with pytest.raises(InvariantError) as vetoed:
                session.append(TEAM_CHECK_STARTED, started("r1"))
            assert "controls" in str(vetoed.value) and "started twice" in str(vetoed.value)
            with pytest.raises(InvariantError):
                session.append(TEAM_PLAN, plan("approved"))
            session.append(TEAM_CHECK_FINISHED, finished("r1"))
            assert not live.state(session).open
            await session.flush()
            live.forget(session)
            live.forget(session)  # twice: a no-op
        finally:
            await host.close()

    def test_a_failed_live_fold_is_logged_once(self, tmp_path: Path) -> None:
        class Log:
            id = TEAM
            events: list[Event] = [event(1, TEAM_PLAN, plan("approved")), event(2, TEAM_PLAN, plan("approved"))]
            last_seq = 2

        live = LiveControls()
        state = live.state(Log())  # type: ignore[arg-type]
        assert state.failure is not None and live.state(Log()).failure == state.failure  # type: ignore[arg-type]
