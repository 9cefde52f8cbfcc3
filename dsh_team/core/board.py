"""Task board decisions: given the folded state, who asks and what, the next snapshot.

These functions are pure. They never append; the journal runs them inside the
Lead's serialized section on the current state, appends the snapshot they return
and folds it. Each check raises its own :class:`TeamError` code, in a fixed order
(the first failing check names the error), so a rejected request appends nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple

import msgspec

from dsh_team.config import is_safe_positive_int
from dsh_team.errors import TeamCode, TeamError
from dsh_team.core.snapshots import TeamTaskSnapshot
from dsh_team.core.state import Board, TeamState
from dsh_team.core.dag import check_candidate
from dsh_team.core.task_view import LEAD_NAME, blockers_completed, is_ready, owner_name
from dsh_team.core.validation import (
    DESCRIPTION_MAX,
    LINE_CONTROLS,
    SUBJECT_MAX,
    normalize_write_scopes,
    required_text,
    text_list,
)

__all__ = ["ACTIONS", "Role", "Actor", "require_task", "decide_create", "decide_update"]

#: A member's place in its Team: the Lead (the root) or a rostered teammate.
Role = Literal["lead", "teammate"]

#: Every update action ``team_task_update`` accepts.
ACTIONS: Final = (
    "claim",
    "release",
    "edit",
    "set_dependencies",
    "complete",
    "reopen",
    "reassign",
    "delete",
)

_GRAPH_CODES: Final = MappingProxyType(
    {
        "self": TeamCode.TASK_DEPENDENCY_CYCLE,
        "cycle": TeamCode.TASK_DEPENDENCY_CYCLE,
        "duplicate": TeamCode.INVALID_ARGUMENT,
        "missing": TeamCode.TASK_NOT_FOUND,
    }
)
_UNAUTHORIZED: Final = "task mutation requires its owner or Team Lead"


class Actor(NamedTuple):
    """The resolved caller of a board operation (a named tuple: built once per Team mutation).

    Attributes:
        member_id: The caller's session id (the Team id for the Lead).
        role: ``lead`` or ``teammate``.
    """

    member_id: str
    role: Role

    @property
    def is_lead(self) -> bool:
        return self.role == "lead"


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


def _blockers(board: Board, task_id: str, value: Any) -> tuple[str, ...]:
    """The per-request blocker check: not itself, no repeats, every blocker live (before the whole-graph check)."""
    blockers = text_list(value, "blocked_by")
    seen: set[str] = set()
    for blocker in blockers:
        if blocker == task_id:
            raise TeamError("a team task cannot block itself", TeamCode.TASK_DEPENDENCY_CYCLE)
        if blocker in seen:
            raise TeamError(f'blocked_by repeats task "{blocker}"', TeamCode.INVALID_ARGUMENT)
        seen.add(blocker)
        found = board.tasks.get(blocker)
        if found is None or found.status == "deleted":
            raise TeamError(
                f'blocker task "{blocker}" is missing or deleted', TeamCode.TASK_NOT_FOUND, task_id=blocker
            )
    return blockers


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
        blocked_by=() if blocked_by is None else _blockers(board, task_id, blocked_by),
        write_scopes=() if write_scopes is None else normalize_write_scopes(write_scopes),
    )
    return _checked(board, candidate, None)


class _Update:
    """One update request as the action rules see it.

    A plain slotted class, not a frozen ``attrs`` one: it lives for one call on
    the durable write path, where a frozen class's guarded attribute writes cost
    a microsecond per update. Nothing writes its attributes after ``__init__``.
    """

    __slots__ = ("state", "actor", "current", "subject", "description", "blocked_by", "write_scopes", "owner")

    def __init__(
        self,
        *,
        state: TeamState,
        actor: Actor,
        current: TeamTaskSnapshot,
        subject: Any,
        description: Any,
        blocked_by: Any,
        write_scopes: Any,
        owner: Any,
    ) -> None:
        self.state = state
        self.actor = actor
        self.current = current
        self.subject = subject
        self.description = description
        self.blocked_by = blocked_by
        self.write_scopes = write_scopes
        self.owner = owner

    def authorize(self) -> None:
        if not (self.actor.is_lead or self.current.owner_id == self.actor.member_id):
            raise TeamError(_UNAUTHORIZED, TeamCode.TASK_UNAUTHORIZED, task_id=self.current.id)

    def require_status(self, action: str, allowed: Sequence[str]) -> None:
        status = self.current.status
        if status not in allowed:
            raise TeamError(
                f'cannot {action} team task "{self.current.id}" while it is {status}',
                TeamCode.TASK_INVALID_TRANSITION,
                task_id=self.current.id,
            )

    def next(self, **changes: Any) -> TeamTaskSnapshot:
        return msgspec.structs.replace(self.current, revision=self.current.revision + 1, **changes)


def _claim(update: _Update) -> TeamTaskSnapshot:
    current, caller = update.current, update.actor.member_id
    if current.owner_id is not None and current.owner_id != caller:
        holder = owner_name(update.state, current.owner_id) or current.owner_id
        raise TeamError(
            f'team task "{current.id}" is already claimed by "{holder}"',
            TeamCode.TASK_ALREADY_CLAIMED,
            task_id=current.id,
        )
    if current.status == "in_progress":  # the caller's own: a transition it already made
        raise TeamError(
            f'team task "{current.id}" is already in progress and owned by you',
            TeamCode.TASK_INVALID_TRANSITION,
            task_id=current.id,
        )
    update.require_status("claim", ("pending",))
    if not is_ready(update.state.tasks, current):
        raise TeamError(f'team task "{current.id}" is not ready to claim', TeamCode.TASK_BLOCKED, task_id=current.id)
    return update.next(status="in_progress", owner_id=caller)


def _release(update: _Update) -> TeamTaskSnapshot:
    update.authorize()
    update.require_status("release", ("in_progress",))
    return update.next(status="pending", owner_id=None)


def _edit(update: _Update) -> TeamTaskSnapshot:
    update.authorize()
    if update.subject is None and update.description is None and update.write_scopes is None:
        raise TeamError("edit needs subject, description or write_scopes", TeamCode.INVALID_ARGUMENT)
    changes: dict[str, Any] = {}
    if update.subject is not None:
        changes["subject"] = required_text(update.subject, "subject", SUBJECT_MAX)
    if update.description is not None:
        changes["description"] = required_text(
            update.description, "description", DESCRIPTION_MAX, allowed=LINE_CONTROLS
        )
    if update.write_scopes is not None:
        changes["write_scopes"] = normalize_write_scopes(update.write_scopes)
    return update.next(**changes)


def _set_dependencies(update: _Update) -> TeamTaskSnapshot:
    update.authorize()
    if update.blocked_by is None:
        raise TeamError("set_dependencies needs blocked_by", TeamCode.INVALID_ARGUMENT)
    return update.next(blocked_by=_blockers(update.state.tasks, update.current.id, update.blocked_by))


def _complete(update: _Update) -> TeamTaskSnapshot:
    update.authorize()
    update.require_status("complete", ("in_progress",))
    return update.next(status="completed")


def _reopen(update: _Update) -> TeamTaskSnapshot:
    update.authorize()
    update.require_status("reopen", ("completed",))
    return update.next(status="pending", owner_id=None)


def _reassign(update: _Update) -> TeamTaskSnapshot:
    current, state = update.current, update.state
    if not update.actor.is_lead:
        raise TeamError("only the Team Lead can reassign tasks", TeamCode.LEAD_REQUIRED)
    update.require_status("reassign", ("pending", "in_progress"))
    if update.owner is not None and not isinstance(update.owner, str):
        raise TeamError("owner must be a string", TeamCode.INVALID_ARGUMENT)
    target = (update.owner or "").strip()
    if not target:
        return update.next(status="pending", owner_id=None)
    # Readiness here means the dependencies: an in-progress task may change hands.
    if not blockers_completed(state.tasks, current):
        raise TeamError(f'team task "{current.id}" is blocked', TeamCode.TASK_BLOCKED, task_id=current.id)
    if target == LEAD_NAME:
        owner_id = state.team_id
    else:
        member = state.members.by_name(target)
        if member is None or member.phase != "active":
            raise TeamError(f'active teammate "{target}" not found', TeamCode.MEMBER_NOT_FOUND, target=target)
        owner_id = member.id
    return update.next(status="in_progress", owner_id=owner_id)


def _delete(update: _Update) -> TeamTaskSnapshot:
    update.authorize()
    dependents = update.state.tasks.live_dependents(update.current.id)
    if dependents:
        raise TeamError(
            f'team task "{update.current.id}" still blocks "{dependents[0]}"',
            TeamCode.TASK_HAS_DEPENDENTS,
            task_id=update.current.id,
        )
    return update.next(status="deleted")


#: The optional fields each action reads; sending any other is a mistake, never ignored.
_FIELDS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "claim": frozenset(),
        "release": frozenset(),
        "edit": frozenset({"subject", "description", "write_scopes"}),
        "set_dependencies": frozenset({"blocked_by"}),
        "complete": frozenset(),
        "reopen": frozenset(),
        "reassign": frozenset({"owner"}),
        "delete": frozenset(),
    }
)

_RULES: Final[Mapping[str, Callable[[_Update], TeamTaskSnapshot]]] = MappingProxyType(
    {
        "claim": _claim,
        "release": _release,
        "edit": _edit,
        "set_dependencies": _set_dependencies,
        "complete": _complete,
        "reopen": _reopen,
        "reassign": _reassign,
        "delete": _delete,
    }
)


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
    rule = _RULES.get(action) if isinstance(action, str) else None
    if rule is None:
        raise TeamError(f"unknown task action {action!r}", TeamCode.INVALID_ARGUMENT)
    allowed = _FIELDS[action]
    for name, value in (("subject", subject), ("description", description), ("blocked_by", blocked_by),
                        ("write_scopes", write_scopes), ("owner", owner)):  # fmt: skip
        if value is not None and name not in allowed:
            raise TeamError(f"{action} does not take {name}", TeamCode.INVALID_ARGUMENT, field=name)
    update = _Update(
        state=state,
        actor=actor,
        current=current,
        subject=subject,
        description=description,
        blocked_by=blocked_by,
        write_scopes=write_scopes,
        owner=owner,
    )
    return _checked(state.tasks, rule(update), current)
