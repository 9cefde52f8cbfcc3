"""The batch path of ``replay`` equals folding every event with ``evolve`` (the naive oracle).

``replay`` collects task records that only supersede their task's snapshot and puts
them on the board at once; these streams are mostly such records, mixed with
creations, deletions, blocker changes, broken revisions, foreign and malformed
records, so every switch between the batch and the per-event path is exercised.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_team.core.fold import evolve, replay
from dsh_team.core.state import initial_state

from team_builders import TEAM, task
from test_team_fold_properties import OTHER, events_of, MAIL, MEMBERS

IDS = ["task-1", "task-2", "task-3"]
STATUSES = ["pending", "in_progress", "completed", "deleted"]

STEPS = st.lists(
    st.tuples(
        st.sampled_from(IDS),
        st.sampled_from(["next", "next", "next", "next", "skip", "restart"]),
        st.sampled_from(STATUSES),
        st.lists(st.sampled_from(IDS), max_size=2),
        st.booleans(),  # keep the previous blockers
        st.sampled_from([TEAM, TEAM, TEAM, TEAM, TEAM, "ancestor"]),
    ),
    max_size=60,
)


def _stream(steps: list[Any], extras: list[tuple[str, Any]], spacing: int) -> list[tuple[str, Any]]:
    """Task records with mostly contiguous revisions; ``extras`` interleaved every ``spacing`` records."""
    revisions: dict[str, int] = {}
    blockers: dict[str, list[str]] = {}
    items: list[tuple[str, Any]] = []
    for index, (task_id, step, status, blocked_by, keep, team_id) in enumerate(steps):
        previous = revisions.get(task_id, 0)
        revision = {"next": previous + 1, "skip": previous + 2, "restart": 1}[step]
        chosen = blockers.get(task_id, []) if keep else blocked_by
        items.append(("team/task", task(task_id, revision, status=status, blocked_by=chosen, team_id=team_id)))
        if team_id == TEAM:
            revisions[task_id] = revision
            blockers[task_id] = chosen
        if extras and spacing and index % spacing == spacing - 1:
            items.append(extras[index % len(extras)])
    return items


class TestBatchReplay:
    @settings(max_examples=300, deadline=None)
    @given(STEPS, st.lists(st.one_of(MEMBERS, MAIL, OTHER), max_size=6), st.integers(0, 8))
    def test_replay_equals_stepwise_evolution(self, steps: list[Any], extras: list[Any], spacing: int) -> None:
        events = events_of(_stream(steps, extras, spacing))
        stepwise = reduce(evolve, events, initial_state(TEAM))
        assert replay(events, TEAM) == stepwise
        if stepwise.failure is None:
            assert replay(events, TEAM).tasks.listed() == stepwise.tasks.listed()

    @settings(max_examples=200, deadline=None)
    @given(STEPS, st.integers(0, 60))
    def test_replay_continues_from_any_state(self, steps: list[Any], cut: int) -> None:
        """Folding a log in two parts equals folding it at once (the journal's carried fold relies on it)."""
        events = events_of(_stream(steps, [], 0))
        whole = replay(events, TEAM)
        assert replay(events[cut:], TEAM, replay(events[:cut], TEAM)) == whole

    def test_a_failed_state_stays_failed(self) -> None:
        events = events_of([("team/task", task("task-1", 2))])
        failed = replay(events, TEAM)
        assert failed.failure is not None
        assert replay(events_of([("team/task", task("task-1"))]), TEAM, failed) is failed

    def test_a_long_run_of_updates_keeps_the_board_order_and_position(self) -> None:
        items: list[tuple[str, Any]] = [("team/task", task("task-1")), ("team/task", task("task-2"))]
        items += [("team/task", task("task-1", revision, status="in_progress")) for revision in range(2, 50)]
        events = events_of(items)
        state = replay(events, TEAM)
        assert [t.id for t in state.tasks.listed()] == ["task-1", "task-2"]
        assert state.tasks.tasks["task-1"].revision == 49 and state.position == len(events)
        assert state == reduce(evolve, events, initial_state(TEAM))
