"""The browser view of a Team: what the panel and the service's subscribers see of it (pure).

The view holds the durable roster (Lead pseudo-row first), the non-deleted task
views, the Team mode and, for a corrupt stream, ``failure`` next to the last valid
roster and board. It is a value of the core, beside the task view it lists,
because the service's own interface returns it; its memoised publication is
:mod:`dsh_team.views.projection`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from dsh_team.core.snapshots import MemberPhase
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME, TaskView, list_views

__all__ = ["BrowserMember", "TeamView", "build_view"]


class BrowserMember(msgspec.Struct, frozen=True, omit_defaults=True):
    """One roster row of the browser view (live status is overlaid by the UI)."""

    id: str
    name: str
    role: Literal["lead", "teammate"]
    phase: MemberPhase
    error: str | None = None


class TeamView(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a browser sees of one Team."""

    enabled: bool
    members: tuple[BrowserMember, ...]
    tasks: tuple[TaskView, ...]
    failure: str | None = None


def build_view(state: TeamState, enabled: bool) -> TeamView:
    """The view of ``state`` (pure; :class:`~dsh_team.views.projection.Publisher` memoises it)."""
    failure = state.failure.message if state.failure is not None else None
    rows = [BrowserMember(id=state.team_id, name=LEAD_NAME, role="lead", phase="active")]
    rows.extend(
        BrowserMember(id=member.id, name=member.name, role="teammate", phase=member.phase, error=member.error)
        for member in state.members.listed()
    )
    return TeamView(enabled=enabled, members=tuple(rows), tasks=tuple(list_views(state)), failure=failure)
