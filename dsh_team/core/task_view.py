"""Task views: a durable snapshot plus what the board around it says about it.

A view adds readiness, the owner's Team name and advisory write-scope warnings to
a snapshot; it never changes the snapshot. Tools, the browser projection and the
service all derive views here, from one folded state, so they always agree.
"""

from __future__ import annotations

from typing import Final

import msgspec

from dsh_team.core.snapshots import TaskStatus, TeamTaskSnapshot
from dsh_team.core.state import Board, TeamState

__all__ = [
    "LEAD_NAME",
    "TaskView",
    "blockers_completed",
    "is_ready",
    "owner_name",
    "write_scope_warnings",
    "task_view",
    "list_views",
]

#: The reserved Team name of every Lead.
LEAD_NAME: Final = "lead"


class TaskView(msgspec.Struct, frozen=True, omit_defaults=True):
    """A task as members see it.

    Attributes:
        ready: ``pending`` and every blocker ``completed``.
        write_scope_warnings: ``"write scopes overlap with <id>"`` for each other
            ``in_progress`` task whose scopes overlap, in board order. Advisory only.
        owner_id: The owning member's session id (absent when unowned).
        owner_name: The owner's Team name (``lead`` for the Lead); absent when
            unowned or when the id is not on the roster.
        checks: The task's quality checks (completing it runs them).
        position: Set on a mutation's result only: the Team log position the view
            reflects (the position of the state it was rendered from).
    """

    id: str
    revision: int
    subject: str
    description: str
    status: TaskStatus
    blocked_by: tuple[str, ...]
    write_scopes: tuple[str, ...]
    ready: bool
    write_scope_warnings: tuple[str, ...]
    owner_id: str | None = None
    owner_name: str | None = None
    position: int | None = None
    checks: tuple[str, ...] = ()


def blockers_completed(board: Board, task: TeamTaskSnapshot) -> bool:
    """Whether every blocker of ``task`` is currently ``completed``."""
    tasks = board.tasks
    for blocker in task.blocked_by:
        found = tasks.get(blocker)
        if found is None or found.status != "completed":
            return False
    return True


def is_ready(board: Board, task: TeamTaskSnapshot) -> bool:
    """Ready to claim: ``pending`` and every blocker ``completed``."""
    return task.status == "pending" and blockers_completed(board, task)


def owner_name(state: TeamState, owner_id: str | None) -> str | None:
    """``lead`` for the Lead, the roster name for a member, else ``None``."""
    if owner_id is None:
        return None
    if owner_id == state.team_id:
        return LEAD_NAME
    member = state.members.members.get(owner_id)
    return None if member is None else member.name


def _prefixes(scope: str) -> list[str]:
    """``a``, ``a/b`` for ``a/b/c``: the proper ``/``-component prefixes of a scope."""
    return [scope[:index] for index, char in enumerate(scope) if char == "/"]


class _ScopeIndex:
    """Where the in-progress tasks write, indexed so an overlap query is O(depth).

    ``under[p]`` holds tasks with a scope equal to or below ``p``; ``exact[p]`` those
    with exactly ``p``. A scope ``s`` overlaps ``under[s]`` plus ``exact[q]`` for every
    proper prefix ``q`` of ``s``. Built once per board version (memoised).
    """

    def __init__(self, board: Board) -> None:
        self.under: dict[str, set[str]] = {}
        self.exact: dict[str, set[str]] = {}
        self.order = board.order
        for task in board.in_progress():
            for scope in task.write_scopes:
                self.exact.setdefault(scope, set()).add(task.id)
                for prefix in (*_prefixes(scope), scope):
                    self.under.setdefault(prefix, set()).add(task.id)

    def overlapping(self, scopes: tuple[str, ...]) -> list[str]:
        found: set[str] = set()
        for scope in scopes:
            found.update(self.under.get(scope, ()))
            for prefix in _prefixes(scope):
                found.update(self.exact.get(prefix, ()))
        return sorted(found, key=self.order.__getitem__)


def _scope_index(board: Board) -> _ScopeIndex:
    index = board.memo.get("scope_index")
    if index is None:
        index = board.memo["scope_index"] = _ScopeIndex(board)
    return index


def write_scope_warnings(board: Board, task: TeamTaskSnapshot) -> tuple[str, ...]:
    """Overlap warnings against every *other* ``in_progress`` task, in board order (scopes are advisory: overlap warns, never refuses)."""
    if not task.write_scopes:
        return ()
    return tuple(
        f"write scopes overlap with {other}"
        for other in _scope_index(board).overlapping(task.write_scopes)
        if other != task.id
    )


def task_view(state: TeamState, task: TeamTaskSnapshot, position: int | None = None) -> TaskView:
    """The view of ``task`` on ``state``'s board (the task need not be listed: tombstones too).

    ``position`` is set on a mutation's result (see :attr:`TaskView.position`).
    """
    board = state.tasks
    return TaskView(
        id=task.id,
        revision=task.revision,
        subject=task.subject,
        description=task.description,
        status=task.status,
        blocked_by=task.blocked_by,
        write_scopes=task.write_scopes,
        ready=is_ready(board, task),
        write_scope_warnings=write_scope_warnings(board, task),
        owner_id=task.owner_id,
        owner_name=owner_name(state, task.owner_id),
        position=position,
        checks=task.checks,
    )


def list_views(state: TeamState) -> list[TaskView]:
    """Views of the non-deleted tasks in board (creation) order.

    Memoised per board version and roster (owner names come from the roster), so
    repeated listings of an unchanged board cost one list copy.
    """
    memo = state.tasks.memo
    cached = memo.get("views")
    if cached is None or cached[0] is not state.members or cached[1] != state.team_id:
        cached = memo["views"] = (
            state.members,
            state.team_id,
            tuple(task_view(state, task) for task in state.tasks.listed()),
        )
    return list(cached[2])
