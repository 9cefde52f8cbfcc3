"""The Team brief: who a member is and what it holds, in a few lines, from the folded state.

A member whose older turns were compacted, or that was cold-resumed, may no longer
have in view who it is, who leads, what it owns and what mail waits for it. The host
asks for this text before every model step of such a member (hook
``dsh_context_brief``) and places it last in the request; it is never recorded, so it
is always current. The state is the source of truth, never the model's memory.

It is paid on every such step, so it stays small: one line per fact, at most
:data:`MAX_TASKS` open tasks (then a count), subjects cut to :data:`SUBJECT_MAX`
characters, each with the blockers it still waits for. Completed tasks are counted,
not listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.roster.roster import MemberView

__all__ = ["MAX_TASKS", "SUBJECT_MAX", "team_brief"]

#: Open tasks listed by name; more are counted.
MAX_TASKS: Final = 8
#: Characters of a task subject shown.
SUBJECT_MAX: Final = 60


def _subject(text: str) -> str:
    return text if len(text) <= SUBJECT_MAX else text[: SUBJECT_MAX - 3] + "..."


def _tasks_line(state: TeamState, member_id: str) -> str:
    board = state.tasks
    owned = [board.tasks[task_id] for task_id in sorted(board.live, key=board.live.__getitem__)
             if board.tasks[task_id].owner_id == member_id]
    open_tasks = [task for task in owned if task.status != "completed"]
    parts = []
    for task in open_tasks[:MAX_TASKS]:
        waiting = [b for b in task.blocked_by if b not in board.tasks or board.tasks[b].status != "completed"]
        blocked = f", blocked by {', '.join(waiting)}" if waiting else ""
        parts.append(f'{task.id} "{_subject(task.subject)}" {task.status}{blocked} (revision {task.revision})')
    if len(open_tasks) > MAX_TASKS:
        parts.append(f"{len(open_tasks) - MAX_TASKS} more (team_task_list)")
    done = len(owned) - len(open_tasks)
    listed = "; ".join(parts) if parts else "none open"
    return f"Your tasks: {listed}" + (f" ({done} completed)." if done else ".")


def team_brief(state: TeamState, member_id: str, name: str, teammates: Sequence[MemberView] | None) -> str:
    """The brief of member ``member_id`` (the Lead when ``teammates`` is given).

    Args:
        state: The Team's folded state.
        member_id: The member's session id (the Team id for the Lead).
        name: The member's Team name.
        teammates: The Lead's roster rows with live status; ``None`` for a teammate.
    """
    if teammates is None:
        who = f'you are teammate "{name}" of an Agent Team; your Team Lead is "{LEAD_NAME}".'
        roster = []
    else:
        who = f'you are the Team Lead ("{LEAD_NAME}") of an Agent Team.'
        rows = [f"{m.name} {m.status}" for m in teammates if m.role == "teammate"]
        roster = ["Teammates: " + (", ".join(rows) if rows else "none") + "."]
    lines = [f"Team brief (current): {who}", *roster, _tasks_line(state, member_id),
             f"Unread Team messages: {state.mail.unread_count(member_id)}."]
    return "\n".join(lines)
