"""Remote operations of a Team for a browser: read the view, create and update tasks.

A browser cannot catch a Python exception, so domain rejections come back *inside*
a successful result (``{"ok": false, "error": {"code": "team-task-conflict" |
"team-rejected", "reason": <TeamCode>, "message"}}``) that it can show, with the
Team's own code as ``reason`` (``TEAM_TASK_BLOCKED`` ...); any other error propagates as a
transport failure. A change whose flush failed is neither: it was appended and is
visible, so it comes back as ``{"ok": true, "value": task, "unconfirmed": {"code":
"team-persistence-unconfirmed", ...}}`` -- a client that retried it would create
it twice; it should read the board instead.

Requests are plain JSON objects; an unknown or missing field is a rejection
(``TEAM_INVALID_ARGUMENT``), never a crash. Results are plain JSON data, exactly
what a transport would carry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from host_spec.events import json_decode, json_encode

from dsh_team.core.task_view import TaskView
from dsh_team.errors import TeamCode, TeamError, UnconfirmedError

if TYPE_CHECKING:
    from host_spec.protocols import Agent

    from dsh_team.api import TeamServiceAPI

__all__ = ["RemoteTeam", "CONFLICT", "REJECTED", "UNCONFIRMED"]

CONFLICT: Final = "team-task-conflict"
REJECTED: Final = "team-rejected"
UNCONFIRMED: Final = "team-persistence-unconfirmed"

_CREATE_KEYS: Final = frozenset({"subject", "description", "blocked_by", "write_scopes", "checks"})
_UPDATE_KEYS: Final = frozenset(
    {"task_id", "expected_revision", "action", "subject", "description", "blocked_by", "write_scopes", "owner"}
)


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
        return {"ok": False, "error": {"code": code, "reason": error.code, "message": error.message}}
    return {"ok": True, "value": _plain(view)}


class RemoteTeam:
    """The browser remote: ``view``, ``create_task``, ``update_task`` for a calling member."""

    def __init__(self, service: TeamServiceAPI) -> None:
        self.service = service

    def view(self, agent: Agent) -> dict[str, Any]:
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

    async def create_task(self, agent: Agent, request: Any) -> dict[str, Any]:
        """``{"ok": true, "value": task}``, ``{"ok": false, "error": {code, message}}``, or unconfirmed.

        Unconfirmed is ``{"ok": true, "value": task, "unconfirmed": {code, message}}``:
        the task is on the board, its durability unknown; never retry it blindly.
        """
        return await _result(
            lambda: self.service.create_task(agent, **_request(request, _CREATE_KEYS, ("subject", "description")))
        )

    async def update_task(self, agent: Agent, request: Any) -> dict[str, Any]:
        """Like :meth:`create_task`; a stale revision is ``team-task-conflict``."""
        required = ("task_id", "expected_revision", "action")
        return await _result(lambda: self.service.update_task(agent, **_request(request, _UPDATE_KEYS, required)))
