"""The browser view of a Team (§11.1) and its publication, plus the G1 remote operations.

The view holds the durable roster (Lead pseudo-row first), the non-deleted task
views, the Team mode and, for a corrupt stream, ``failure`` next to the last valid
roster and board. It is memoised on the identity of the state's collections, so a
mailbox-only event republishes nothing, and a failed state (frozen by the fold)
is published once and never again.

Remote operations return domain rejections *inside* a successful result
(``{"ok": false, "error": {"code": "team-task-conflict" | "team-rejected", ...}}``)
so a browser can show them; any other error propagates as a transport failure.
A change whose flush failed is neither: it was appended and is visible, so it
comes back as ``{"ok": true, "value": task, "unconfirmed": {"code":
"team-persistence-unconfirmed", ...}}`` -- a client that retried it would create
it twice; it should read the board instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import structlog

from host_spec.events import json_decode, json_encode
from host_spec.records import Handle

from dsh_team.errors import TeamCode, TeamError, UnconfirmedError
from dsh_team.core.records import MemberPhase
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME, TaskView, list_views

if TYPE_CHECKING:
    from dsh_team.service import TeamService

__all__ = ["MemberRow", "TeamView", "build_view", "Publisher", "RemoteTeam", "CONFLICT", "REJECTED", "UNCONFIRMED"]

log = structlog.get_logger(__name__)

CONFLICT: Final = "team-task-conflict"
REJECTED: Final = "team-rejected"
UNCONFIRMED: Final = "team-persistence-unconfirmed"

_CREATE_KEYS: Final = frozenset({"subject", "description", "blocked_by", "write_scopes"})
_UPDATE_KEYS: Final = frozenset(
    {"task_id", "expected_revision", "action", "subject", "description", "blocked_by", "write_scopes", "owner"}
)


class MemberRow(msgspec.Struct, frozen=True, omit_defaults=True):
    """One roster row of the browser view (live status is overlaid by the UI)."""

    id: str
    name: str
    role: Literal["lead", "teammate"]
    phase: MemberPhase
    error: str | None = None


class TeamView(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a browser sees of one Team."""

    enabled: bool
    members: tuple[MemberRow, ...]
    tasks: tuple[TaskView, ...]
    failure: str | None = None


def build_view(state: TeamState, enabled: bool) -> TeamView:
    """The view of ``state`` (pure; see :class:`Publisher` for memoisation)."""
    rows = [MemberRow(id=state.team_id, name=LEAD_NAME, role="lead", phase="active")]
    rows.extend(
        MemberRow(id=member.id, name=member.name, role="teammate", phase=member.phase, error=member.error)
        for member in state.members.listed()
    )
    return TeamView(enabled=enabled, members=tuple(rows), tasks=tuple(list_views(state)), failure=state.failure)


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


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (dicts and lists), exactly what a transport would carry."""
    return json_decode(json_encode(value))


def _request(request: Any, allowed: frozenset[str], required: tuple[str, ...]) -> dict[str, Any]:
    """The request's fields; unknown or missing fields are rejections, not crashes."""
    if not isinstance(request, Mapping):
        raise TeamError("request must be an object", TeamCode.INVALID_ARGUMENT)
    unknown = sorted(str(key) for key in request if key not in allowed)
    if unknown:
        raise TeamError(f"unknown request fields: {', '.join(unknown)}", TeamCode.INVALID_ARGUMENT)
    for name in required:
        if name not in request:
            raise TeamError(f"{name} is required", TeamCode.INVALID_ARGUMENT)
    return dict(request)


async def _result(work: Callable[[], Awaitable[TaskView]]) -> dict[str, Any]:
    try:
        view = await work()
    except UnconfirmedError as error:
        unconfirmed = {"code": UNCONFIRMED, "message": error.message}
        return {"ok": True, "value": _plain(error.value), "unconfirmed": unconfirmed}
    except TeamError as error:
        code = CONFLICT if error.code == TeamCode.TASK_STALE_REVISION else REJECTED
        return {"ok": False, "error": {"code": code, "message": error.message}}
    return {"ok": True, "value": _plain(view)}


class RemoteTeam:
    """The browser remote (G1): ``view``, ``create_task``, ``update_task`` for a calling member."""

    def __init__(self, service: TeamService) -> None:
        self.service = service

    def view(self, agent: Any) -> dict[str, Any]:
        """``{"enabled", "members", "tasks", "failure"}`` of the caller's Team.

        Carries exactly what the projection holds: Team mode, and for a corrupt
        stream the failure text next to the last valid roster and board, so a browser
        can tell a broken Team from a quiet one (``failure`` is ``null`` otherwise).

        Raises:
            TeamError: ``TEAM_NOT_MEMBER`` (not a rejection: the caller cannot act on it).
        """
        view = self.service.view(agent)
        return {
            "enabled": view.enabled,
            "members": _plain(view.members),
            "tasks": _plain(view.tasks),
            "failure": view.failure,
        }

    async def create_task(self, agent: Any, request: Any) -> dict[str, Any]:
        """``{"ok": true, "value": task}``, ``{"ok": false, "error": {code, message}}``, or unconfirmed.

        Unconfirmed is ``{"ok": true, "value": task, "unconfirmed": {code, message}}``:
        the task is on the board, its durability unknown; never retry it blindly.
        """
        return await _result(
            lambda: self.service.create_task(agent, **_request(request, _CREATE_KEYS, ("subject", "description")))
        )

    async def update_task(self, agent: Any, request: Any) -> dict[str, Any]:
        """Like :meth:`create_task`; a stale revision is ``team-task-conflict``."""
        required = ("task_id", "expected_revision", "action")
        return await _result(lambda: self.service.update_task(agent, **_request(request, _UPDATE_KEYS, required)))
