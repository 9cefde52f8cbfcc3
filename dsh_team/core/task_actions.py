"""The update actions of the task board: one rule per action of ``team_task_update``.

Each rule turns one request on one current task into its next-revision
snapshot, or raises the action's own :class:`TeamError` code. They run inside
:func:`dsh_team.core.board.decide_update` after its shared checks (the task
exists, the revision matches, it is not deleted) and before the whole-graph
check, so a rule only states what is particular to its action. Adding an action
is one rule here and one entry in each table below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import msgspec

from dsh_team.errors import TeamCode, TeamError
from dsh_team.core.actor import Actor
from dsh_team.core.snapshots import TeamTaskSnapshot
from dsh_team.core.state import Board, TeamState
from dsh_team.core.task_view import LEAD_NAME, blockers_completed, is_ready, owner_name
from dsh_team.core.validation import (
    DESCRIPTION_MAX,
    LINE_CONTROLS,
    SUBJECT_MAX,
    normalize_write_scopes,
    required_text,
    text_list,
)

__all__ = ["ACTIONS", "ACTION_FIELDS", "ACTION_RULES", "TaskUpdate", "checked_blockers"]

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

_UNAUTHORIZED: Final = "task mutation requires its owner or Team Lead"


def checked_blockers(board: Board, task_id: str, value: Any) -> tuple[str, ...]:
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


class TaskUpdate:
    """One update request as the action rules see it.

    A plain slotted class, not a frozen ``attrs`` one: it lives for one call on
    the durable write path, where a frozen class's guarded attribute writes cost
    a microsecond per update. Nothing writes its attributes after ``__init__``.
    """

    __slots__ = ("state", "actor", "current", "subject", "description", "blocked_by", "write_scopes", "owner")

    def __init__(
        self,
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


def _claim(update: TaskUpdate) -> TeamTaskSnapshot:
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


def _release(update: TaskUpdate) -> TeamTaskSnapshot:
    update.authorize()
    update.require_status("release", ("in_progress",))
    return update.next(status="pending", owner_id=None)


def _edit(update: TaskUpdate) -> TeamTaskSnapshot:
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


def _set_dependencies(update: TaskUpdate) -> TeamTaskSnapshot:
    update.authorize()
    if update.blocked_by is None:
        raise TeamError("set_dependencies needs blocked_by", TeamCode.INVALID_ARGUMENT)
    return update.next(blocked_by=checked_blockers(update.state.tasks, update.current.id, update.blocked_by))


def _complete(update: TaskUpdate) -> TeamTaskSnapshot:
    update.authorize()
    update.require_status("complete", ("in_progress",))
    return update.next(status="completed")


def _reopen(update: TaskUpdate) -> TeamTaskSnapshot:
    update.authorize()
    update.require_status("reopen", ("completed",))
    return update.next(status="pending", owner_id=None)


def _reassign(update: TaskUpdate) -> TeamTaskSnapshot:
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


def _delete(update: TaskUpdate) -> TeamTaskSnapshot:
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
ACTION_FIELDS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
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

ACTION_RULES: Final[Mapping[str, Callable[[TaskUpdate], TeamTaskSnapshot]]] = MappingProxyType(
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
