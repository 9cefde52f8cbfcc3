"""The publication of a Team's browser view to subscribers.

The view itself (:mod:`dsh_team.core.team_view`) is a pure function of the
state; here it is memoised on the identity of the state's collections, so a
mailbox-only event republishes nothing, and a failed state (frozen by the fold)
is published once and never again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from host_spec.records import Handle

from dsh_team.core.state import TeamState
from dsh_team.core.team_view import TeamView, build_view

__all__ = ["ViewListener", "Publisher"]

log = structlog.get_logger(__name__)


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
