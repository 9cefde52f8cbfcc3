"""The timeline of a Team: one entry per applied Team record, with its cause.

A person watching a Team wants to know *who did what through which tool*. Every
Team record carries the host's ``cause`` (agent, tool call, tool), so each entry
names the member by its Team name and says in a few words what changed. An entry
is made only for a record that changed the folded state: records of other Teams
and ignored duplicates are not Team activity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from host_spec.events import Event

from dsh_team.core.records import (
    TEAM_MEMBER,
    TEAM_MESSAGE_DELIVERED,
    TEAM_MESSAGE_QUEUED,
    TEAM_MESSAGE_READ,
    TEAM_MODE,
    TEAM_QUIESCENT,
    TEAM_TASK,
)
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import owner_name

__all__ = ["TimelineEntry", "timeline_entry"]

_PREVIEW: Final = 60


class TimelineEntry(msgspec.Struct, frozen=True):
    """One Team change as the page lists it.

    Attributes:
        seq: The record's position in the Lead log (the slider and SSE ids use it).
        time: Epoch milliseconds of the append.
        type: The record type (``team/task`` ...).
        summary: What changed, in words (``task-1 claimed by builder (rev 2)``).
        member: Team name of the member that caused it (``None`` when unknown).
        tool: The tool whose call appended it (``None`` outside a tool call).
        call_id: That tool call's id.
        message_id: The Team message a mail record is about (``None`` for other records),
            so the page can show that message's current status next to its send.
    """

    seq: int
    time: int
    type: str
    summary: str
    member: str | None
    tool: str | None
    call_id: str | None
    message_id: str | None = None


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "\u2026"


def _name(state: TeamState, member_id: str | None) -> str | None:
    return None if member_id is None else owner_name(state, member_id) or member_id


def _task(value: dict[str, Any], state: TeamState) -> str:
    task = value["task"]
    what = f"{task['id']} {task['status'].replace('_', ' ')}"
    if task["revision"] == 1:
        what = f"{task['id']} created: {_preview(task['subject'])}"
    elif task.get("owner_id") is not None and task["status"] == "in_progress":
        what += f" by {_name(state, task['owner_id'])}"
    return f"{what} (rev {task['revision']})"


def _member(value: dict[str, Any], state: TeamState) -> str:
    member = value["member"]
    return f"{member['name']} {member['phase']}"


def _queued(value: dict[str, Any], state: TeamState) -> str:
    message = value["message"]
    return f"message {message['sender_name']} \u2192 {_name(state, message['target_id'])}"


def _delivered(value: dict[str, Any], state: TeamState) -> str:
    return f"message delivered to {_name(state, value['target_id'])}"


def _read(value: dict[str, Any], state: TeamState) -> str:
    return f"message read by {_name(state, value['target_id'])}"


def _mode(value: dict[str, Any], state: TeamState) -> str:
    return f"Team mode {'on' if value['enabled'] else 'off'}"


def _quiescent(value: dict[str, Any], state: TeamState) -> str:
    stalled = value["stalled"]
    parts = [
        f"{len(stalled.get(key, ()))} {label}"
        for key, label in (("in_progress", "in progress"), ("ready", "ready"), ("failed", "failed"))
        if stalled.get(key)
    ]
    return "Team quiescent: " + (", ".join(parts) + " stalled" if parts else "nothing stalled")


_SUMMARIES: Final[dict[str, Callable[[dict[str, Any], TeamState], str]]] = {
    TEAM_TASK: _task,
    TEAM_MEMBER: _member,
    TEAM_MESSAGE_QUEUED: _queued,
    TEAM_MESSAGE_DELIVERED: _delivered,
    TEAM_MESSAGE_READ: _read,
    TEAM_MODE: _mode,
    TEAM_QUIESCENT: _quiescent,
}


def timeline_entry(before: TeamState, after: TeamState, event: Event) -> TimelineEntry | None:
    """The entry for ``event`` folded from ``before`` to ``after``, or ``None`` when it changed nothing.

    A record that failed the stream gets an entry too (``stream failed``): the
    moment the Team broke is part of its history.
    """
    if after is before:
        return None
    cause = event.cause
    value = event.value()
    summary = "stream failed: " + after.failure.message if after.failure is not None else _SUMMARIES[event.type](value, after)
    return TimelineEntry(
        seq=event.seq,
        time=event.time,
        type=event.type,
        summary=summary,
        member=_name(after, cause.agent_id) if cause is not None else None,
        tool=cause.tool if cause is not None else None,
        call_id=cause.call_id if cause is not None else None,
        message_id=_message_id(event.type, value) if after.failure is None else None,
    )


def _message_id(kind: str, value: dict[str, Any]) -> str | None:
    if kind == TEAM_MESSAGE_QUEUED:
        return str(value["message"]["id"])
    if kind in (TEAM_MESSAGE_DELIVERED, TEAM_MESSAGE_READ):
        return str(value["message_id"])
    return None
