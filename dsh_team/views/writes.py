"""The "writes" section of ``dsh team show``: every file write of the Team's members, audited.

The durable record of a write is the ``workspace/write`` event the workspace host
appended to the *writer's own* session (its ``cause`` names the agent and the tool
call; its ``audit`` holds the Team's write-scope verdict at that moment). The Lead
log says who the members are, so the section reads the Lead's and each member's
log, oldest write first. Nothing here judges anything again: a row shows the
verdict that was given when the write happened, which is what the member saw.

With ``--at SEQ`` only writes appended no later than the Lead's event ``SEQ`` are
listed (by event time: member logs have their own sequence numbers).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from host_spec.cli import SessionReader
from host_spec.errors import SessionError
from host_spec.events import Event
from host_spec.workspace import WORKSPACE_WRITE, FileWrite

from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME

__all__ = ["ShowWrite", "collect_writes", "write_row"]

_decoder: Final = msgspec.json.Decoder(FileWrite)


class ShowWrite(msgspec.Struct, frozen=True):
    """One audited write.

    Attributes:
        member: The writer's Team name (``lead`` for the Lead).
        member_id: The writer's session id.
        path: Workspace-relative path written.
        tool: ``write_file`` or ``edit_file``.
        call_id: The tool call that wrote (the event's cause).
        tasks: In-progress tasks the writer owned then.
        in_scope: Inside a write scope of one of ``tasks``; ``null`` when the Team gave
            no verdict (Team mode was off).
        warnings: What the member was told.
        time: Epoch milliseconds of the write record.
    """

    member: str
    member_id: str
    path: str
    tool: str
    call_id: str | None
    tasks: tuple[str, ...]
    in_scope: bool | None
    warnings: tuple[str, ...]
    time: int


def _writers(state: TeamState) -> Iterable[tuple[str, str]]:
    yield state.team_id, LEAD_NAME
    for member in state.members.listed():
        yield member.id, member.name


def write_row(event: Event, session_id: str, name: str) -> ShowWrite | None:
    """The row of one ``workspace/write`` event of ``session_id`` (Team name ``name``), else ``None``.

    ``None`` also for a payload that does not decode: the section lists what it can read.
    """
    if event.type != WORKSPACE_WRITE:
        return None
    try:
        write = _decoder.decode(event.data)
    except msgspec.DecodeError:
        return None
    audit = write.audit
    return ShowWrite(
        member=audit.member if audit is not None else name, member_id=session_id, path=write.path,
        tool=write.tool, call_id=event.cause.call_id if event.cause is not None else None,
        tasks=audit.tasks if audit is not None else (), in_scope=audit.in_scope if audit is not None else None,
        warnings=audit.warnings if audit is not None else (), time=event.time,
    )


def collect_writes(reader: SessionReader, state: TeamState, *, until: int | None = None) -> tuple[ShowWrite, ...]:
    """Every member's audited writes in time order (only those at or before ``until`` ms when given).

    A member log that cannot be read (never created, damaged at the start) contributes
    nothing; a damaged tail contributes what precedes the damage.
    """
    rows: list[ShowWrite] = []
    for session_id, name in _writers(state):
        try:
            events = reader.read(session_id, salvage=True).events
        except SessionError:
            continue
        start = reader.header(session_id).seed_length  # a fork's inherited prefix is someone else's work
        for event in events[start:]:
            if until is not None and event.time > until:
                continue
            row = write_row(event, session_id, name)
            if row is not None:
                rows.append(row)
    rows.sort(key=lambda row: row.time)
    return tuple(rows)
