"""The Team board as a run's progress items (``dsh.progress``): what an ACP editor shows as its plan.

One item per live task, in board order, read from the live Team service as the
Lead (the same fold every other view reads). A task's status maps one to one
(``pending``, ``in_progress``, ``completed``; deleted tasks are not listed), and
the item names the task, its subject and its owner, so the editor's plan reads
like ``dsh team show``'s board.
"""

from __future__ import annotations

from collections.abc import Sequence

from host_spec.progress import ProgressItem, ProgressStatus
from host_spec.protocols import Agent, Host

from dsh_team.api import TeamServiceAPI
from dsh_team.core.task_view import TaskView

__all__ = ["board_progress", "task_item"]


def task_item(task: TaskView) -> ProgressItem:
    """One task as a progress item: ``task-1 Write the module (alice)``."""
    status: ProgressStatus = "completed" if task.status == "completed" else (
        "in_progress" if task.status == "in_progress" else "pending")
    owner = f" ({task.owner_name})" if task.owner_name else ""
    return ProgressItem(f"{task.id} {task.subject}{owner}", status)


def board_progress(host: Host, root: Agent) -> Sequence[ProgressItem] | None:
    """The ``dsh.progress`` entry point: the board of ``root``'s Team, ``None`` without the Team plugin."""
    service = host.find_service(TeamServiceAPI)
    if service is None:
        return None
    return [task_item(task) for task in service.list_tasks(root)]
