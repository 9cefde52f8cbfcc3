"""Task board decisions: given the folded state, who asks and what, the next snapshot.

These functions are pure. They never append; the journal runs them inside the
Lead's serialized section on the current state, appends the snapshot they return
and folds it. Each check raises its own :class:`TeamError` code, in a fixed order
(the first failing check names the error), so a rejected request appends nothing.
The rules particular to each update action are :mod:`dsh_team.core.task_actions`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

from dsh_team.config import is_safe_positive_int
from dsh_team.errors import TeamCode, TeamError
from dsh_team.core.actor import Actor
from dsh_team.core.dag import check_candidate
from dsh_team.core.snapshots import TeamTaskSnapshot
from dsh_team.core.state import Board, TeamState
from dsh_team.core.task_actions import ACTION_FIELDS, ACTION_RULES, TaskUpdate, checked_blockers
from dsh_team.core.validation import (
    DESCRIPTION_MAX,
    LINE_CONTROLS,
    SUBJECT_MAX,
    check_list,
    normalize_write_scopes,
    required_text,
)

__all__ = ["require_task", "decide_create", "decide_update"]

_GRAPH_CODES: Final = MappingProxyType(
    {
        "self": TeamCode.TASK_DEPENDENCY_CYCLE,
        "cycle": TeamCode.TASK_DEPENDENCY_CYCLE,
        "duplicate": TeamCode.INVALID_ARGUMENT,
        "missing": TeamCode.TASK_NOT_FOUND,
    }
)


#: The optional fields of an update, in the order :func:`decide_update` checks them.
_OPTIONAL_FIELDS: Final = ("subject", "description", "blocked_by", "write_scopes", "owner")


def require_task(state: TeamState, task_id: Any) -> TeamTaskSnapshot:
    """The current snapshot of ``task_id``, deleted tombstones included.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` for a non-string or empty id,
            ``TEAM_TASK_NOT_FOUND`` for an unknown one.
    """
    if not isinstance(task_id, str) or not task_id:
        raise TeamError("task_id must be a non-empty string", TeamCode.INVALID_ARGUMENT)
    task = state.tasks.tasks.get(task_id)
    if task is None:
        raise TeamError(f'team task "{task_id}" not found', TeamCode.TASK_NOT_FOUND, task_id=task_id)
    return task


def _checked(board: Board, candidate: TeamTaskSnapshot, previous: TeamTaskSnapshot | None) -> TeamTaskSnapshot:
    violation = check_candidate(board, candidate, previous)
    if violation is not None:
        raise TeamError(violation.message, _GRAPH_CODES[violation.kind], task_id=candidate.id)
    return candidate


def decide_create(
    state: TeamState,
    actor: Actor,
    *,
    subject: Any,
    description: Any,
    blocked_by: Any = None,
    write_scopes: Any = None,
    checks: Any = None,
    max_tasks: int,
) -> TeamTaskSnapshot:
    """The revision-1 snapshot of a new task. Any member may create.

    Raises:
        TeamError: ``TEAM_TASK_LIMIT`` (count or id space), ``TEAM_INVALID_ARGUMENT``,
            ``TEAM_TASK_NOT_FOUND``, ``TEAM_TASK_DEPENDENCY_CYCLE``,
            ``TEAM_INVALID_WRITE_SCOPE``.
    """
    board = state.tasks
    if len(board.live) >= max_tasks:
        raise TeamError(f"team task limit of {max_tasks} reached", TeamCode.TASK_LIMIT)
    task_id = f"task-{board.next_task_number}"
    if task_id in board.tasks:
        raise TeamError("Team task id space exhausted", TeamCode.TASK_LIMIT)
    candidate = TeamTaskSnapshot(
        id=task_id,
        revision=1,
        subject=required_text(subject, "subject", SUBJECT_MAX),
        description=required_text(description, "description", DESCRIPTION_MAX, allowed=LINE_CONTROLS),
        status="pending",
        blocked_by=() if blocked_by is None else checked_blockers(board, task_id, blocked_by),
        write_scopes=() if write_scopes is None else normalize_write_scopes(write_scopes),
        checks=() if checks is None else check_list(checks),
    )
    return _checked(board, candidate, None)


def decide_update(
    state: TeamState,
    actor: Actor,
    *,
    task_id: Any,
    expected_revision: Any,
    action: Any,
    subject: Any = None,
    description: Any = None,
    blocked_by: Any = None,
    write_scopes: Any = None,
    owner: Any = None,
) -> TeamTaskSnapshot:
    """The next-revision snapshot of a compare-and-set update.

    Checks run in this order: the task exists, its revision equals
    ``expected_revision``, it is not deleted, then the action's own rules, then the
    whole-graph check.

    Raises:
        TeamError: ``TEAM_TASK_NOT_FOUND``, ``TEAM_INVALID_ARGUMENT``, ``TEAM_TASK_STALE_REVISION``,
            ``TEAM_TASK_DELETED``, then the action's own codes and the DAG codes.
    """
    current = require_task(state, task_id)
    if not is_safe_positive_int(expected_revision):
        raise TeamError("expected_revision must be a positive safe integer", TeamCode.INVALID_ARGUMENT)
    if current.revision != expected_revision:
        raise TeamError(
            f'stale team task "{current.id}" revision {expected_revision}; '
            f"current revision is {current.revision}",
            TeamCode.TASK_STALE_REVISION,
            task_id=current.id,
            revision=current.revision,
        )
    if current.status == "deleted":
        raise TeamError(f'team task "{current.id}" is deleted', TeamCode.TASK_DELETED, task_id=current.id)
    rule = ACTION_RULES.get(action) if isinstance(action, str) else None
    if rule is None:
        raise TeamError(f"unknown task action {action!r}", TeamCode.INVALID_ARGUMENT)
    allowed = ACTION_FIELDS[action]
    for name, value in zip(_OPTIONAL_FIELDS, (subject, description, blocked_by, write_scopes, owner)):
        if value is not None and name not in allowed:
            raise TeamError(f"{action} does not take {name}", TeamCode.INVALID_ARGUMENT, field=name)
    update = TaskUpdate(state, actor, current, subject, description, blocked_by, write_scopes, owner)
    return _checked(state.tasks, rule(update), current)
