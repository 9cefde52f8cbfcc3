"""The write-scope audit: is a member's file write covered by the tasks it is working on?

Write scopes are the Team's advisory plan of who changes what. The workspace
host asks the Team about every write (through the contract's
:class:`~host_spec.workspace.WriteAuditor`), and this module answers from the
Team's folded state at that moment:

* ``in_scope``: the path lies inside a write scope of an ``in_progress`` task the
  writer owns (a scope covers itself and everything below it, by ``/``
  components, exactly as scope overlap is judged on the board), or one of those
  tasks has no write scopes at all (it limits nothing, so nothing is outside it);
* a warning when it does not (including when the writer owns no task in
  progress), and one for every *other* member's ``in_progress`` task whose scope
  covers the path.

Advisory only, like the scopes themselves: the verdict travels with the write
(tool result and ``workspace/write`` record) and never refuses it. The verdict is
pure; who asks and from which Team's state is :mod:`dsh_team.write_auditor`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from host_spec.workspace import WriteAudit

from dsh_team.core.task_view import owner_name

if TYPE_CHECKING:
    from dsh_team.core.state import TeamState

__all__ = ["covers", "audit_write"]


def covers(scope: str, path: str) -> bool:
    """Whether write scope ``scope`` covers workspace-relative ``path``."""
    return path == scope or path.startswith(scope + "/")


def audit_write(state: TeamState, member_id: str, member_name: str, path: str) -> WriteAudit:
    """The verdict on member ``member_id`` writing ``path`` in ``state`` (pure)."""
    active = state.tasks.in_progress()
    own = [task for task in active if task.owner_id == member_id]
    tasks = tuple(task.id for task in own)
    # A task without write scopes plans nothing about its writes: no write can be outside it.
    in_scope = any(not task.write_scopes or any(covers(scope, path) for scope in task.write_scopes) for task in own)
    warnings: list[str] = []
    if not in_scope:
        if tasks:
            warnings.append(f"{path} is outside the write scopes of your task(s) {', '.join(tasks)}")
        else:
            warnings.append(f"{path} is written while you own no task in progress")
    for task in active:
        if task.owner_id != member_id and any(covers(scope, path) for scope in task.write_scopes):
            owner = owner_name(state, task.owner_id) or task.owner_id
            warnings.append(f"{path} is inside the write scope of {task.id}, in progress by {owner}")
    return WriteAudit(member=member_name, tasks=tasks, in_scope=in_scope, warnings=tuple(warnings))
