"""The pre-append check of the roster's side records: ``team/role`` and ``team/shutdown``.

The role book and the shutdown book fold these records beside the Team fold; a
record they cannot read is logged and skipped there, because a fold that read it
could only guess. Skipping is the reader's last line of defence, not a rule: a
role that silently vanishes changes which tools a resumed member may call, and a
lost ``released`` edge would wake a member that was shut down. So the same strict
decode runs before such a record may enter a log, and the invariant refuses what
the books would skip.

Records of another Team (a fork's inherited prefix carries its parent's) are the
fold's business only where their ``team_id`` is the log's own session, exactly as
the Team fold ignores foreign Team records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from dsh_team.roster.roles import ROLE_VERSION, TEAM_ROLE, RoleRecord
from dsh_team.roster.shutdown import SHUTDOWN_VERSION, TEAM_SHUTDOWN, ShutdownRecord

if TYPE_CHECKING:
    from host_spec.events import Event

__all__ = ["SIDE_RECORD_TYPES", "side_record_failure"]

#: The record types this module vets.
SIDE_RECORD_TYPES: Final = frozenset({TEAM_ROLE, TEAM_SHUTDOWN})

_DECODERS: Final[dict[str, tuple[msgspec.json.Decoder[RoleRecord | ShutdownRecord], int]]] = {
    TEAM_ROLE: (msgspec.json.Decoder(RoleRecord), ROLE_VERSION),
    TEAM_SHUTDOWN: (msgspec.json.Decoder(ShutdownRecord), SHUTDOWN_VERSION),
}


def side_record_failure(team_id: str, event: Event) -> str | None:
    """Why ``event`` (a ``team/role`` or ``team/shutdown`` record) may not enter ``team_id``'s log, or ``None``.

    Args:
        team_id: The id of the session whose log would hold the event.
        event: The candidate; its type must be one of :data:`SIDE_RECORD_TYPES`.

    Returns:
        ``None`` for a readable record at the current version (or a record of
        another Team); otherwise a message naming what is wrong.
    """
    decoder, version = _DECODERS[event.type]
    try:
        record = decoder.decode(event.data)
    except msgspec.DecodeError as exc:
        return f"unreadable {event.type} record: {exc}"
    if record.team_id != team_id:
        return None
    if record.version != version:
        return f"{event.type} record version {record.version} is not the supported version {version}"
    return None
