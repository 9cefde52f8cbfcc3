"""The pre-append check of the side records: ``team/role``, ``team/shutdown``, ``team/worktree``, ``team/merge``.

The role book and the shutdown book fold these records beside the Team fold; a
record they cannot read is logged and skipped there, because a fold that read it
could only guess. Skipping is the reader's last line of defence, not a rule: a
role that silently vanishes changes which tools a resumed member may call, and a
lost ``released`` edge would wake a member that was shut down. So the books'
own decoder and version (:class:`~dsh_team.log.member_records.RecordKind`)
judge such a record before it may enter a log, and the invariant refuses what
the books would skip.

Records of another Team (a fork's inherited prefix carries its parent's) are the
fold's business only where their ``team_id`` is the log's own session, exactly as
the Team fold ignores foreign Team records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from dsh_team.log.member_records import RecordKind
from dsh_team.roster.roles import ROLE_RECORDS
from dsh_team.roster.shutdown import SHUTDOWN_RECORDS
from dsh_team.worktrees.records import MERGE_RECORDS, WORKTREE_RECORDS

if TYPE_CHECKING:
    from host_spec.events import Event

__all__ = ["SIDE_RECORD_TYPES", "side_record_failure"]

_KINDS: Final[dict[str, RecordKind[Any]]] = {kind.event_type: kind for kind in (
    ROLE_RECORDS, SHUTDOWN_RECORDS, WORKTREE_RECORDS, MERGE_RECORDS)}
#: The record types this module vets.
SIDE_RECORD_TYPES: Final = frozenset(_KINDS)


def side_record_failure(team_id: str, event: Event) -> str | None:
    """Why ``event`` (a side record of :data:`SIDE_RECORD_TYPES`) may not enter ``team_id``'s log, or ``None``.

    Args:
        team_id: The id of the session whose log would hold the event.
        event: The candidate; its type must be one of :data:`SIDE_RECORD_TYPES`.

    Returns:
        ``None`` for a readable record at the current version (or a record of
        another Team); otherwise a message naming what is wrong.
    """
    return _KINDS[event.type].failure(team_id, event)
