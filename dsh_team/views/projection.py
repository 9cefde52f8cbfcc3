"""The browser view of a Team and its publication to subscribers.

The view holds the durable roster (Lead pseudo-row first), the non-deleted task
views, the Team mode and, for a corrupt stream, ``failure`` next to the last valid
roster and board. It is memoised on the identity of the state's collections, so a
mailbox-only event republishes nothing, and a failed state (frozen by the fold)
is published once and never again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec
import structlog

from host_spec.records import Handle

from dsh_team.core.snapshots import MemberPhase
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME, TaskView, list_views

__all__ = ["BrowserMember", "TeamView", "ViewListener", "build_view", "Publisher"]

log = structlog.get_logger(__name__)


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
    """The view of ``state`` (pure; see :class:`Publisher` for memoisation)."""
    failure = state.failure.message if state.failure is not None else None
    rows = [BrowserMember(id=state.team_id, name=LEAD_NAME, role="lead", phase="active")]
    rows.extend(
        BrowserMember(id=member.id, name=member.name, role="teammate", phase=member.phase, error=member.error)
        for member in state.members.listed()
    )
    return TeamView(enabled=enabled, members=tuple(rows), tasks=tuple(list_views(state)), failure=failure)


#: ``(team_id, view)``: called for every newly published view.
ViewListener = Callable[[str, TeamView], None]


class Publisher:
    """Per-Team memoised views and their listeners."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[tuple[Any, ...], TeamView]] = {}
        self._listeners: list[ViewListener] = []

    def view(self, state: TeamState, enabled: bool) -> TeamView:
        """The memoised view: the same object while roster, board, mode and failure are unchanged."""
        key = (state.members, state.tasks, enabled, state.failure)
        last = self._last.get(state.team_id)
        if last is not None:
            members, tasks, was_enabled, failure = last[0]
            if members is key[0] and tasks is key[1] and was_enabled == enabled and failure == key[3]:
                return last[1]
        view = build_view(state, enabled)
        self._last[state.team_id] = (key, view)
        return view

    @property
    def listening(self) -> bool:
        """Whether anybody subscribed (publication is skipped otherwise)."""
        return bool(self._listeners)

    def publish(self, state: TeamState, enabled: bool) -> TeamView | None:
        """Tell every listener about a changed view; returns it, or ``None`` if unchanged."""
        last = self._last.get(state.team_id)
        view = self.view(state, enabled)
        if last is not None and last[1] is view:
            return None
        for listener in list(self._listeners):
            try:
                listener(state.team_id, view)
            except Exception:
                log.exception("team.view_listener_failed", team=state.team_id)
        return view

    def subscribe(self, listener: ViewListener) -> Handle:
        """Receive every published view until the returned handle is disposed."""
        self._listeners.append(listener)

        return Handle(lambda: self._listeners.remove(listener), label="team:view-listener")

    def forget(self, team_id: str) -> None:
        self._last.pop(team_id, None)
