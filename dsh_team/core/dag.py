"""Incremental validation of the task dependency graph (a DAG over non-deleted tasks).

Re-validating the whole board for every candidate task would cost O(board). The board
before the candidate is known valid (the fold only ever accepts valid states), so
a candidate can only break the graph through its *own* edges or its own deletion:

* a non-deleted candidate: each blocker must differ from the task, appear once and
  name a non-deleted task; a cycle can only pass through a newly added edge, so the
  search starts from the added blockers only and looks for a path back;
* a candidate that becomes deleted: no non-deleted task may still list it
  (:attr:`Board.dependents` answers that without a scan);
* unchanged blockers on a non-deleted task need no check at all (a blocker with
  live dependents can never be deleted), which is the common update.

The same function serves the fold (violation -> ``failure``) and the task board
(violation kind -> error code), so replay and service can never disagree.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

import immutables

from dsh_team.core.snapshots import TeamTaskSnapshot
from dsh_team.core.persistent import EMPTY
from dsh_team.core.state import Board

__all__ = ["DagViolation", "check_candidate", "relink"]

DagViolationKind = Literal["self", "duplicate", "missing", "cycle"]

_DELETED: Final = "deleted"


class DagViolation(NamedTuple):
    """Why a candidate would break the DAG; ``blocker`` is the offending edge's end."""

    kind: DagViolationKind
    message: str
    blocker: str


def _live_blockers(task: TeamTaskSnapshot | None) -> tuple[str, ...]:
    return () if task is None or task.status == _DELETED else task.blocked_by


def check_candidate(
    board: Board, candidate: TeamTaskSnapshot, previous: TeamTaskSnapshot | None
) -> DagViolation | None:
    """The first DAG violation ``candidate`` (replacing ``previous``) would cause, if any.

    Args:
        board: The valid board before the candidate.
        candidate: The new snapshot of the task.
        previous: The task's current snapshot on ``board`` (``None`` for a new id).
    """
    task_id = candidate.id
    if candidate.status == _DELETED:
        if previous is None or previous.status == _DELETED:
            return None
        dependents = board.live_dependents(task_id)
        if dependents:
            return DagViolation(
                "missing", f'blocker task "{task_id}" for "{dependents[0]}" is missing or deleted', task_id
            )
        return None
    blockers = candidate.blocked_by
    if previous is not None and blockers == previous.blocked_by and previous.status != _DELETED:
        return None  # unchanged blockers on a live task: the common update (checked first, no call)
    old = _live_blockers(previous)
    if blockers == old:
        return None
    tasks = board.tasks
    seen: set[str] = set()
    for blocker in blockers:
        if blocker == task_id:
            return DagViolation("self", f'team task "{task_id}" cannot block itself', blocker)
        if blocker in seen:
            return DagViolation("duplicate", f'team task "{task_id}" repeats blocker "{blocker}"', blocker)
        seen.add(blocker)
        found = tasks.get(blocker)
        if found is None or found.status == _DELETED:
            return DagViolation(
                "missing", f'blocker task "{blocker}" for "{task_id}" is missing or deleted', blocker
            )
    added = [blocker for blocker in blockers if blocker not in old]
    path = _path_back(tasks, added, task_id)
    if path is not None:
        return DagViolation("cycle", "task dependency cycle includes " + " -> ".join(path), path[1])
    return None


def _path_back(
    tasks: immutables.Map[str, TeamTaskSnapshot], starts: list[str], target: str
) -> list[str] | None:
    """A cycle ``[target, start, ..., target]`` if some start reaches ``target``, else ``None``.

    Iterative DFS over ``blocked_by`` edges of the valid board; every node reached
    is non-deleted (a valid board has no edge to a deleted task).
    """
    parent = dict.fromkeys(starts, target)  # starts are distinct: duplicates were rejected
    stack = list(starts)
    while stack:
        node = stack.pop()
        if node == target:
            path = [target]
            step = parent[target]
            while step != target:
                path.append(step)
                step = parent[step]
            path.append(target)
            path.reverse()
            return path
        for blocker in tasks[node].blocked_by:
            if blocker not in parent:
                parent[blocker] = node
                stack.append(blocker)
    return None


def relink(
    dependents: immutables.Map[str, immutables.Map[str, None]],
    candidate: TeamTaskSnapshot,
    previous: TeamTaskSnapshot | None,
) -> immutables.Map[str, immutables.Map[str, None]]:
    """The reverse-edge map after ``candidate`` replaces ``previous`` (same map if no edge moved)."""
    old = _live_blockers(previous)
    new = _live_blockers(candidate)
    if old == new:
        return dependents
    task_id = candidate.id
    with dependents.mutate() as edit:
        for blocker in old:
            if blocker not in new:
                remaining = edit[blocker].delete(task_id)
                if len(remaining):
                    edit[blocker] = remaining
                else:
                    del edit[blocker]
        for blocker in new:
            if blocker not in old:
                edit[blocker] = edit.get(blocker, EMPTY).set(task_id, None)
        relinked = edit.finish()
    return relinked
