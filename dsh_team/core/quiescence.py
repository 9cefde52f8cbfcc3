"""Quiescence: when nothing in a Team can make progress, and what it leaves undone.

A Team is quiescent when no member is running (a member parked in ``wait_agent``
counts as not running: it only waits for someone else), no member is being
provisioned, no message is queued or delivered but unread, and so nothing can
change until someone acts. The Team then records *one* ``team/quiescent`` record
naming the stalled work, instead of pinging the Lead once per idle member.

The condition has a durable half, decided here from the folded state alone, and a
live half (who is running) that only the service can see. The durable half is also
what the fold holds every quiescence record to, so a record written while mail was
open, or listing other work than the board shows, cannot enter the log.

De-duplication is a property of the state: the record moves the Team's
``position``, so "no change since the last quiescence" is exactly
``state.quiet``; the next record needs a roster, task or mail change first. Read
receipts and mode selections do not count as changes.
"""

from __future__ import annotations

from dsh_team.core.records import StalledTask, TeamStalled
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import is_ready

__all__ = ["durably_quiet", "stalled_work", "may_record"]


def durably_quiet(state: TeamState) -> bool:
    """The durable half of quiescence: no mail queued or unread, nobody provisioning."""
    mail = state.mail
    if len(mail.pending) or len(mail.unread):
        return False
    return not any(member.phase == "provisioning" for member in state.members.listed())


def stalled_work(state: TeamState) -> TeamStalled:
    """What a quiescent Team leaves undone, read from the board and the roster.

    Every ``in_progress`` task is stalled once nobody runs; a ready task is a pending
    one whose blockers are all completed (pending tasks are never owned); a failed
    member is one whose provisioning failed.
    """
    board = state.tasks
    in_progress: list[StalledTask] = []
    ready: list[str] = []
    for task in board.listed():
        if task.status == "in_progress" and task.owner_id is not None:
            in_progress.append(StalledTask(task.id, task.owner_id))
        elif is_ready(board, task):
            ready.append(task.id)
    failed = tuple(member.id for member in state.members.listed() if member.phase == "failed")
    return TeamStalled(in_progress=tuple(in_progress), ready=tuple(ready), failed=failed)


def may_record(state: TeamState, *, waiting: bool) -> bool:
    """Whether a quiescence record may be appended now, given that nobody is running.

    Args:
        state: The Team's authoritative state.
        waiting: Some member is parked in a wait; then even a Team with no records
            yet is worth reporting (the waiter would otherwise wait out its timeout).
            A Team that never did anything is not reported on its own: a plain run
            of a root that never used the Team writes no Team record.
    """
    if state.failure is not None or state.quiet or not durably_quiet(state):
        return False
    return waiting or state.position > 0
