"""Resolving a target name (a message's, an interrupt's, a shutdown request's) against the roster.

Pure over the folded state, so every path that names a member -- the Team tools,
``dsh team send``, the web panel's steering -- answers the same way, and the mail
room can resolve a target without depending on the roster's live service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh_team.core.task_view import LEAD_NAME
from dsh_team.errors import TeamCode, TeamError

if TYPE_CHECKING:
    from dsh_team.core.state import TeamState

__all__ = ["resolve_target"]


def resolve_target(state: TeamState, name: Any) -> tuple[str, str]:
    """``(member id, name)`` of a trimmed target name: ``lead`` or an *active* teammate.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` (not a string), ``TEAM_MEMBER_NOT_FOUND``
            (unknown, provisioning or failed).
    """
    if not isinstance(name, str):
        raise TeamError("target must be a member name", TeamCode.INVALID_ARGUMENT)
    wanted = name.strip()
    if wanted == LEAD_NAME:
        return state.team_id, LEAD_NAME
    member = state.members.by_name(wanted)
    if member is None or member.phase != "active":
        raise TeamError(f'active teammate "{wanted}" not found', TeamCode.MEMBER_NOT_FOUND, target=wanted)
    return member.id, wanted
