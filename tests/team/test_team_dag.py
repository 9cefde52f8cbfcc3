"""The incremental DAG check against a naive whole-graph search (an independent oracle).

``check_candidate`` only searches from the blockers a candidate *adds* and
trusts the board before it to be valid. The oracle below trusts nothing: it
rebuilds the whole graph with the candidate in place and runs a plain
three-colour DFS over every edge. Hypothesis draws random valid boards (random
DAGs, with deleted tombstones) and random candidates (new or existing ids, any
status, blockers that may repeat, name themselves, name missing or deleted
tasks, or close cycles of any length), and both must agree on the verdict. A
reported cycle must also be a real cycle of the new graph.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_team.core.dag import check_candidate
from dsh_team.core.snapshots import TeamTaskSnapshot
from dsh_team.core.state import TeamState

from team_builders import Log

STATUSES = ["pending", "in_progress", "completed"]


def snapshot(task_id: str, revision: int, status: str, blocked_by: list[str]) -> TeamTaskSnapshot:
    return TeamTaskSnapshot(
        id=task_id, revision=revision, subject="s", description="d", status=status,  # type: ignore[arg-type]
        blocked_by=tuple(blocked_by), write_scopes=(),
    )  # fmt: skip


@st.composite
def valid_boards(draw: st.DrawFn) -> tuple[TeamState, dict[str, tuple[str, list[str]]]]:
    """A folded board whose live tasks form a random DAG, plus its plain ``id -> (status, blockers)`` model.

    Edges only go from a higher to a lower rank of a random permutation, so the
    graph is acyclic whatever shape it takes (chains, diamonds, fans).
    """
    count = draw(st.integers(1, 12))
    ids = [f"task-{n}" for n in range(1, count + 1)]
    rank = dict(zip(ids, draw(st.permutations(range(count)))))
    deleted = set(draw(st.lists(st.sampled_from(ids), max_size=3)))
    blockers: dict[str, list[str]] = {}
    for task_id in ids:
        lower = [other for other in ids if rank[other] < rank[task_id] and other not in deleted]
        blockers[task_id] = draw(st.lists(st.sampled_from(lower), unique=True, max_size=4)) if lower else []
    for task_id in deleted:  # a deleted task lists nothing and nothing live lists it
        blockers[task_id] = []
    log = Log()
    for task_id in ids:
        log.task(task_id)
    for task_id in sorted(ids, key=rank.__getitem__):  # each prefix is a sub-DAG, so every step is valid
        if blockers[task_id]:
            log.task(task_id, 2, blocked_by=blockers[task_id])
    model: dict[str, tuple[str, list[str]]] = {}
    for task_id in ids:
        revision = 2 if blockers[task_id] else 1
        if task_id in deleted:
            log.task(task_id, revision + 1, status="deleted")
            model[task_id] = ("deleted", [])
        else:
            model[task_id] = ("pending", blockers[task_id])
    state = log.fold()
    assert state.failure is None, state.failure
    return state, model


def naive_verdict(model: dict[str, tuple[str, list[str]]], task_id: str, status: str, blockers: list[str]) -> str | None:
    """The rule stated directly: the first bad blocker, else whether the whole new graph has a cycle."""
    live = {tid: edges for tid, (st_, edges) in model.items() if st_ != "deleted"}
    if status == "deleted":
        if task_id not in live:
            return None
        return "missing" if any(task_id in edges for tid, edges in live.items() if tid != task_id) else None
    for index, blocker in enumerate(blockers):
        if blocker == task_id:
            return "self"
        if blocker in blockers[:index]:
            return "duplicate"
        if blocker not in live:
            return "missing"
    graph = {**live, task_id: blockers}
    colour: dict[str, int] = {}  # 1 = on the DFS stack, 2 = finished

    def cyclic_from(node: str) -> bool:
        colour[node] = 1
        for nxt in graph[node]:
            if colour.get(nxt) == 1 or (colour.get(nxt) is None and cyclic_from(nxt)):
                return True
        colour[node] = 2
        return False

    return "cycle" if any(colour.get(node) is None and cyclic_from(node) for node in graph) else None


def reaching(model: dict[str, tuple[str, list[str]]], task_id: str) -> list[str]:
    """Live tasks with a dependency path to ``task_id`` (an edge from it back to one closes a cycle)."""
    found: list[str] = []
    frontier = [task_id]
    while frontier:
        node = frontier.pop()
        for other, (status, edges) in model.items():
            if status != "deleted" and node in edges and other not in found:
                found.append(other)
                frontier.append(other)
    return found


@st.composite
def cases(draw: st.DrawFn) -> tuple[TeamState, dict[str, tuple[str, list[str]]], TeamTaskSnapshot, TeamTaskSnapshot | None]:
    state, model = draw(valid_boards())
    ids = list(model)
    fresh = f"task-{len(ids) + 1}"
    task_id = draw(st.sampled_from([*ids, fresh]))
    pool = [*ids, fresh, "task-404"]
    blockers = draw(st.lists(st.sampled_from(pool), max_size=5))
    if draw(st.booleans()):  # most lists are well-formed, so the cycle search is what decides
        blockers = [b for i, b in enumerate(blockers) if b != task_id and b not in blockers[:i] and b in model
                    and model[b][0] != "deleted"]  # fmt: skip
        back = [b for b in reaching(model, task_id) if b not in blockers]
        if back and draw(st.booleans()):  # a back edge closes a cycle of any length, mostly behind other blockers
            blockers.insert(draw(st.integers(min(1, len(blockers)), len(blockers))), draw(st.sampled_from(back)))
    status = draw(st.sampled_from([*STATUSES, "deleted"]))
    previous = state.tasks.tasks.get(task_id)
    revision = 1 if previous is None else previous.revision + 1
    return state, model, snapshot(task_id, revision, status, blockers), previous


def is_cycle_of(path: list[str], task_id: str, graph: dict[str, list[str]]) -> bool:
    return len(path) >= 2 and path[0] == path[-1] == task_id and all(b in graph[a] for a, b in zip(path, path[1:]))


@settings(max_examples=600, deadline=None)
@given(cases())
def test_the_incremental_check_agrees_with_a_whole_graph_search(case: Any) -> None:
    """Same verdict as the naive search for every candidate; a reported cycle is a real cycle."""
    state, model, candidate, previous = case
    expected = naive_verdict(model, candidate.id, candidate.status, list(candidate.blocked_by))
    violation = check_candidate(state.tasks, candidate, previous)
    assert (violation.kind if violation else None) == expected, (violation, model, candidate)
    if violation is not None and violation.kind == "cycle":
        live = {tid: edges for tid, (status, edges) in model.items() if status != "deleted"}
        path = violation.message.removeprefix("task dependency cycle includes ").split(" -> ")
        assert is_cycle_of(path, candidate.id, {**live, candidate.id: list(candidate.blocked_by)}), path
        assert violation.blocker == path[1]


def test_a_cycle_through_the_second_new_blocker_and_a_later_branch_is_found() -> None:
    """A fixed witness: the cycle leaves through the second added blocker and a non-first branch of a task."""
    log = Log()
    for n in (1, 2, 3, 4):
        log.task(f"task-{n}")
    log.task("task-3", 2, blocked_by=["task-4", "task-1"])  # task-3 -> task-1 is its *second* edge
    state = log.fold()
    candidate = snapshot("task-1", 2, "pending", ["task-2", "task-3"])
    violation = check_candidate(state.tasks, candidate, state.tasks.tasks["task-1"])
    assert violation is not None and violation.kind == "cycle"
    assert violation.message == "task dependency cycle includes task-1 -> task-3 -> task-1"
    assert naive_verdict({"task-1": ("pending", []), "task-2": ("pending", []), "task-3": ("pending", ["task-4", "task-1"]),
                          "task-4": ("pending", [])}, "task-1", "pending", ["task-2", "task-3"]) == "cycle"  # fmt: skip
