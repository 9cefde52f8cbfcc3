"""Steering a live Team from the page, through the Team service's remote operations.

Every request acts as one member (``as``: a Team name, default ``lead``) and uses
that member's live agent as its credential, exactly as a tool call would. A
message from the message box (:meth:`Steering.send`) is the user's, never a
member's: the Lead's live agent is its credential and the target reads it as
the user's (``send_from_user``). The outcome always comes back as a successful response:

* ``{"ok": true, "value": ...}`` -- done and durable;
* ``{"ok": true, "value": ..., "unconfirmed": {...}}`` -- appended and visible, its
  flush failed: the page asks the user to re-read, it never retries a create;
* ``{"ok": false, "error": {"code", "message", ...}}`` -- a domain rejection. A
  stale revision is ``team-task-conflict`` and carries ``current``: the task as it
  is now, so the page shows the conflict next to what changed.

Anything else (a bug, a stopping service) propagates and becomes a transport
failure, which the page shows as such.
"""

from __future__ import annotations

from typing import Any, Final

from host_spec.protocols import Agent

from dsh_team.api import TeamServiceAPI
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.errors import TeamCode, TeamError, UnconfirmedError
from dsh_team.views.remote import CONFLICT, REJECTED, UNCONFIRMED, RemoteTeam
from dsh_team.web.document import plain
from dsh_team.web.sources import LiveRun

__all__ = ["Steering", "ACTING_KEY"]

#: The request field naming the member the page acts as.
ACTING_KEY: Final = "as"


def _rejection(error: TeamError) -> dict[str, Any]:
    return {"ok": False, "error": {"code": REJECTED, "reason": error.code, "message": error.message}}


class Steering:
    """The page's state-changing operations on a live run.

    Args:
        run: The live run (its service and agents).
    """

    def __init__(self, run: LiveRun) -> None:
        self.run = run

    def _service(self) -> TeamServiceAPI:
        service = self.run.service
        if service is None:
            raise TeamError("the Team service is not loaded", TeamCode.NOT_MEMBER)
        return service

    def caller(self, body: dict[str, Any]) -> Agent:
        """The live agent of the member named by ``body["as"]`` (removed from ``body``).

        Raises:
            TeamError: ``TEAM_NOT_MEMBER`` (no run yet, or the member has no live agent),
                ``TEAM_MEMBER_NOT_FOUND`` (no such name), ``TEAM_INVALID_ARGUMENT``.
        """
        name = body.pop(ACTING_KEY, LEAD_NAME)
        if not isinstance(name, str):
            raise TeamError(f"{ACTING_KEY} must be a member name", TeamCode.INVALID_ARGUMENT)
        team_id = self.run.team_id
        lead = self.run.agent(team_id) if team_id is not None else None
        if lead is None:
            raise TeamError("the run has no live Lead", TeamCode.NOT_MEMBER)
        if name == LEAD_NAME:
            return lead
        ids = {row.name: row.id for row in self._service().list_members(lead)}
        if name not in ids:
            raise TeamError(f"no member named {name!r}", TeamCode.MEMBER_NOT_FOUND)
        agent = self.run.agent(ids[name])
        if agent is None:
            raise TeamError(f"{name} has no live agent to act with (it is not loaded)", TeamCode.NOT_MEMBER)
        return agent

    async def create_task(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a task as the acting member."""
        try:
            agent, service = self.caller(body), self._service()
        except TeamError as error:
            return _rejection(error)
        result: dict[str, Any] = await RemoteTeam(service).create_task(agent, body)
        return result

    async def update_task(self, task_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Claim/complete/release/reopen/edit ``task_id`` at the revision the page saw."""
        try:
            agent, service = self.caller(body), self._service()
        except TeamError as error:
            return _rejection(error)
        result: dict[str, Any] = await RemoteTeam(service).update_task(agent, {**body, "task_id": task_id})
        if not result["ok"] and result["error"]["code"] == CONFLICT:
            result["current"] = plain(service.get_task(agent, task_id))
        return result

    async def set_enabled(self, body: dict[str, Any]) -> dict[str, Any]:
        """Switch Team mode (root only); in force at the acting tree's next step."""
        try:
            agent = self.caller(body)
            enabled = body.pop("enabled", None)
            if body:
                raise TeamError(f"unknown request fields: {', '.join(sorted(body))}", TeamCode.INVALID_ARGUMENT)
            await self._service().set_enabled(agent, enabled)
        except TeamError as error:
            return _rejection(error)
        return {"ok": True, "value": {"enabled": enabled}}

    async def decide_plan(self, member: str, body: dict[str, Any]) -> dict[str, Any]:
        """Approve or reject ``member``'s submitted plan as the user (through the Lead's credential).

        ``body``: ``{"plan": "approve" | "reject", "feedback": "..."}``. The teammate is
        told by Team mail from the Lead, exactly as when the Lead decides.
        """
        try:
            body.pop(ACTING_KEY, None)  # the user decides through the Lead, whoever the page acts as
            agent, service = self.caller({}), self._service()
            plan, feedback = body.pop("plan", None), body.pop("feedback", "")
            if body:
                raise TeamError(f"unknown request fields: {', '.join(sorted(body))}", TeamCode.INVALID_ARGUMENT)
            if plan not in ("approve", "reject"):
                raise TeamError("plan must be approve or reject", TeamCode.INVALID_ARGUMENT)
            sent = await service.plan_step(agent, plan=plan, target=member, text=feedback, by="user")
        except TeamError as error:
            return _rejection(error)
        return {"ok": True, "value": {"member": member, "plan": plan, "message_id": sent.message_id}}
    async def send(self, body: dict[str, Any]) -> dict[str, Any]:
        """The user's message ``{"target", "text"}`` to a member (or ``lead``): queued once, delivered once.

        ``value`` is ``{"message_id", "status"}`` (``accepted``: the target holds it;
        ``queued``: durable, delivery pending). Unconfirmed means queued and visible:
        the page says so and never resends it.
        """
        try:
            unknown = sorted(set(body) - {"target", "text"})
            if unknown:
                raise TeamError(f"unknown request fields: {', '.join(unknown)}", TeamCode.INVALID_ARGUMENT)
            lead = self.caller({})
            result = await self._service().send_from_user(lead, body.get("target"), body.get("text"))
        except UnconfirmedError as error:
            value = plain(error.value)
            return {"ok": True, "value": value, "unconfirmed": {"code": UNCONFIRMED, "message": error.message}}
        except TeamError as error:
            return _rejection(error)
        return {"ok": True, "value": {"message_id": result.message_id, "status": result.status}}

    async def answer_permission(self, ask_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Answer permission ask ``ask_id`` as the user: ``{"answer": "allow" | "always" | "deny", "reason": "..."}``.

        The same one answer path as ``/permit`` and the Lead's tool: a second answer
        is rejected with reason ``PERMISSION_ALREADY_ANSWERED`` and writes nothing.
        """
        try:
            body.pop(ACTING_KEY, None)  # the user answers through the Lead, whoever the page acts as
            agent, service = self.caller({}), self._service()
            answer, reason = body.pop("answer", None), body.pop("reason", "")
            if body:
                raise TeamError(f"unknown request fields: {', '.join(sorted(body))}", TeamCode.INVALID_ARGUMENT)
            ask = await service.answer_permission(agent, ask_id=ask_id, answer=answer, reason=reason, by="user")
        except TeamError as error:
            return _rejection(error)
        assert ask.answer is not None  # just answered
        return {"ok": True, "value": {"ask_id": ask_id, "decision": ask.answer.decision, "always": ask.answer.always}}
