"""The pure decision of permission asks: ``decide_permission(state, command, limits)``.

Every path that records an ask or an answer (the live router, the Lead's
``send_message(permission=...)``, the chat's ``/permit``, the web panel,
``dsh team permit`` on a stopped run, an editor) decides through this one
function over the folded :class:`~dsh_team.permissions.ledger.PermissionsState`,
so the rules cannot differ between them:

* a request for a call already recorded records nothing (asking again after a
  crash finds the request the first ask recorded);
* an answer names a recorded ask (``PERMISSION_NOT_FOUND``) that has no answer
  yet (``PERMISSION_ALREADY_ANSWERED``: exactly once, whoever came first);
* the Lead answers only an ask delegated to it (``PERMISSION_NOT_DELEGATED``); the
  user may answer any ask, delegated or not (the user's override);
* a reason is at most ``limits.max_reason_chars`` characters.
"""

from __future__ import annotations

from typing import Final, Literal

import attrs

from dsh_team.errors import TeamCode, TeamError
from dsh_team.permissions.ledger import PermissionsState
from dsh_team.permissions.records import PERMISSIONS_VERSION, AnsweredRecord, Answerer, RequestedRecord

__all__ = ["PermissionLimits", "RequestCommand", "AnswerCommand", "decide_permission", "ANSWERS"]

#: The answers a caller may give, and what each records: ``(decision, always)``.
ANSWERS: Final[dict[str, tuple[Literal["allow", "deny"], bool]]] = {
    "allow": ("allow", False),
    "always": ("allow", True),
    "deny": ("deny", False),
}


@attrs.frozen
class PermissionLimits:
    """Bounds of what an answer may carry."""

    max_reason_chars: int = 2000


@attrs.frozen
class RequestCommand:
    """Record the ask of one call (see :class:`~dsh_team.permissions.records.RequestedRecord`)."""

    key: str
    member: str
    member_id: str
    tool: str
    arguments: str
    rule: str
    deadline: int
    route: Literal["user", "lead"] = "user"
    always_rule: str = ""


@attrs.frozen
class AnswerCommand:
    """Answer ``ask_id`` with ``answer`` (``allow``, ``always``, ``deny``) as ``by``, for ``reason``."""

    ask_id: str
    answer: str
    by: Answerer
    reason: str = ""


def decide_permission(
    state: PermissionsState, command: RequestCommand | AnswerCommand, limits: PermissionLimits = PermissionLimits()
) -> RequestedRecord | AnsweredRecord | None:
    """The record ``command`` appends (``None``: nothing, the request is on record already).

    Raises:
        TeamError: ``TEAM_STREAM_FAILED`` (the stream does not fold), ``TEAM_INVALID_ARGUMENT``
            (an unknown answer, a reason too long), ``PERMISSION_NOT_FOUND``,
            ``PERMISSION_ALREADY_ANSWERED``, ``PERMISSION_NOT_DELEGATED``.
    """
    if state.failure is not None:
        raise TeamError(f"the Team's permission stream does not fold ({state.failure})", TeamCode.STREAM_FAILED)
    if isinstance(command, RequestCommand):
        if command.key in state.keys:
            return None
        return RequestedRecord(
            version=PERMISSIONS_VERSION, team_id=state.team_id, ask_id=state.next_id(), key=command.key,
            member=command.member, member_id=command.member_id, tool=command.tool, arguments=command.arguments,
            rule=command.rule, deadline=command.deadline, route=command.route, always_rule=command.always_rule,
        )  # fmt: skip
    chosen = ANSWERS.get(command.answer)
    if chosen is None:
        raise TeamError(f"answer {command.answer!r} is not one of allow, always, deny", TeamCode.INVALID_ARGUMENT,
                        field="answer")  # fmt: skip
    if len(command.reason) > limits.max_reason_chars:
        raise TeamError(f"a reason has at most {limits.max_reason_chars} characters", TeamCode.INVALID_ARGUMENT,
                        field="reason")  # fmt: skip
    ask = state.asks.get(command.ask_id)
    if ask is None:
        raise TeamError(f"no permission ask {command.ask_id!r} in this Team", TeamCode.PERMISSION_NOT_FOUND,
                        ask_id=command.ask_id)  # fmt: skip
    if ask.answer is not None:
        raise TeamError(
            f"permission ask {command.ask_id} was already answered ({ask.answer.decision} by {ask.answer.by})",
            TeamCode.PERMISSION_ALREADY_ANSWERED, ask_id=command.ask_id,
        )  # fmt: skip
    if command.by == "lead" and ask.request.route != "lead":
        raise TeamError(f"permission ask {command.ask_id} is the user's to answer, not the Lead's",
                        TeamCode.PERMISSION_NOT_DELEGATED, ask_id=command.ask_id)  # fmt: skip
    decision, always = chosen
    return AnsweredRecord(
        version=PERMISSIONS_VERSION, team_id=state.team_id, ask_id=command.ask_id, decision=decision, by=command.by,
        reason=command.reason, always=always and bool(ask.request.always_rule),
    )  # fmt: skip
