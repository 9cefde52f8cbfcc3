"""The compact delta of a cursor wait: what changed in a Team after a log position.

A reader that saw the Team at position ``since`` and applies the delta gets what
a fresh read shows now: every row here is the entity's *current* value (not a
diff), so applying a row twice, or a row the reader already had, changes nothing.

* ``members``: roster rows whose record changed after ``since`` or whose live
  status may have (the caller passes which; live status is not in the log);
* ``tasks``: tasks whose record changed (a ``deleted`` status means: drop it);
* ``mail``: per target, messages waiting for delivery (``queued``), delivered and
  not yet seen by a completed model step (``unread``) and seen (``read``);
* ``sent``: messages whose status (queued, delivered, read) moved: the caller's
  own, and for the Lead every member's (the Lead coordinates all of them).

Each list is bounded by :data:`DELTA_CAP`; a longer one is left out and its name
listed in ``truncated``: the reader re-lists that part instead of trusting a
partial answer. ``sent`` is also truncated when the cursor is older than a read
message the index no longer keeps (:mod:`dsh_team.core.changes`). The delta is built from the fold's change index
(:mod:`dsh_team.core.changes`), never from the log.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TypeVar

import msgspec

from dsh_team.core.changes import DELTA_CAP
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import owner_name

__all__ = ["DELTA_CAP", "MemberChange", "TaskChange", "MailChange", "SentChange", "TeamDelta", "team_delta"]

_Row = TypeVar("_Row")

class MemberChange(msgspec.Struct, frozen=True):
    """A member's current target name and status (``running``/``inactive``/``provisioning``/``failed``)."""

    target: str
    status: str


class TaskChange(msgspec.Struct, frozen=True, omit_defaults=True):
    """A task's current id, status, revision and owner name (absent when unowned)."""

    id: str
    status: str
    revision: int
    owner_name: str | None = None


class MailChange(msgspec.Struct, frozen=True):
    """One member's current mail counts (``target`` is its name)."""

    target: str
    queued: int
    unread: int
    read: int


class SentChange(msgspec.Struct, frozen=True):
    """One message: its id, sender and target names and current status."""

    message_id: str
    sender: str
    target: str
    status: str


class TeamDelta(msgspec.Struct, frozen=True, omit_defaults=True):
    """What changed after ``since`` (see the module docstring); empty lists are omitted."""

    since: int
    members: tuple[MemberChange, ...] = ()
    tasks: tuple[TaskChange, ...] = ()
    mail: tuple[MailChange, ...] = ()
    sent: tuple[SentChange, ...] = ()
    truncated: tuple[str, ...] = ()


def _name(state: TeamState, member_id: str) -> str:
    found = owner_name(state, member_id)
    return member_id if found is None else found


def team_delta(
    state: TeamState,
    since: int,
    caller_id: str,
    statuses: Mapping[str, str],
    live: Collection[str] = (),
) -> TeamDelta:
    """The delta of ``state`` after ``since`` as ``caller_id`` sees it.

    Args:
        state: The Team's folded state now.
        since: The position the caller last saw.
        caller_id: The waiting member (its own row is never reported; its sent
            messages are, and the Lead's are every member's).
        statuses: Member id -> current status of every member (Lead included),
            exactly as a roster read shows it.
        live: Ids whose live status may have changed after ``since``.
    """
    keys = state.changes.after(since)
    truncated: list[str] = []

    def capped(name: str, rows: list[_Row]) -> tuple[_Row, ...]:
        if len(rows) > DELTA_CAP:
            truncated.append(name)
            return ()
        return tuple(rows)

    order = state.members.order
    moved = (keys.members | frozenset(live)) - {caller_id}
    member_ids = sorted(moved & statuses.keys(), key=lambda key: (key != state.team_id, order.get(key, -1)))
    members = [MemberChange(_name(state, key), statuses[key]) for key in member_ids]

    board = state.tasks
    tasks = [
        TaskChange(task.id, task.status, task.revision, owner_name(state, task.owner_id))
        for task in (board.tasks[key] for key in sorted(keys.tasks, key=board.order.__getitem__))
    ]

    mail = state.mail
    targets = sorted(keys.mail, key=lambda key: (key != state.team_id, order.get(key, -1), key))
    counts = [
        MailChange(_name(state, key), mail.pending_count(key), mail.unread_count(key), mail.read_count(key))
        for key in targets
    ]

    sender = None if caller_id == state.team_id else caller_id
    outgoing = state.changes.sent_after(sender, since)
    sent = [
        SentChange(entry.message_id, entry.sender_name, _name(state, entry.target_id), mail.status(entry.message_id))
        for entry in outgoing or ()
    ]

    listed = (capped("members", members), capped("tasks", tasks), capped("mail", counts))
    if outgoing is None:  # the index let go of a message read after ``since``: re-list
        truncated.append("sent")
    return TeamDelta(
        since=since,
        members=listed[0],
        tasks=listed[1],
        mail=listed[2],
        sent=capped("sent", sent),
        truncated=tuple(truncated),
    )
