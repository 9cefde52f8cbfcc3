"""Deleted tasks as tombstones: what the fold keeps of a task once it is deleted.

A deleted task is final (no action applies to it again) but stays readable by
``get_task``. Keeping its whole last snapshot would make the board grow with the
Team's history: a Team that creates and deletes tasks for days would hold every
subject and description it ever deleted. The fold keeps a *tombstone* instead:
the id, the revision, the ``deleted`` status and the owner (a cursor delta names
it), nothing else. The whole snapshot is the deleting record itself, and the
change index already says where it is (``changes.tasks[id]``: a deleted task's
last task record is the one that deleted it), so a reader that needs it reads
that one event of the Lead log (:func:`restore`) instead of the fold holding it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Final

from host_spec.events import Event

from dsh_team.core.records import TEAM_TASK, VERSION, decode_payload
from dsh_team.core.snapshots import TeamTaskSnapshot
from dsh_team.core.state import TeamState
from dsh_team.core.upcast import decode_older

__all__ = ["DELETED", "tombstone", "restore"]

#: The status of a deleted task.
DELETED: Final = "deleted"


def tombstone(task: TeamTaskSnapshot) -> TeamTaskSnapshot:
    """What the board keeps of the deleted snapshot ``task``: id, revision, status and owner.

    The owner id is interned: a Team has few members, so every tombstone of one
    owner shares one string.
    """
    owner = task.owner_id
    return TeamTaskSnapshot(
        task.id, task.revision, "", "", DELETED, (), (), None if owner is None else sys.intern(owner)
    )


def restore(state: TeamState, task: TeamTaskSnapshot, events: Sequence[Event]) -> TeamTaskSnapshot:
    """The whole snapshot ``task`` stands for, read from the Lead log ``events`` when it is a tombstone.

    ``events`` is the log ``state`` was folded from (``events[i].seq == i + 1``);
    a live task is returned as it is. The deleting record is at the seq the
    change index holds for the task, and it was folded, so it decodes (at its
    own version, upcast like the fold does).
    """
    if task.status != DELETED:
        return task
    event = events[state.changes.tasks[task.id] - 1]
    record = decode_payload(TEAM_TASK, event.data)
    if record.version != VERSION:
        record = decode_older(TEAM_TASK, event.data)
    restored: TeamTaskSnapshot = record.task
    return restored
