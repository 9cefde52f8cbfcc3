"""The Permissions section of ``dsh team show`` (and its JSON): every ask and its one answer.

Folded from the Lead log by the same fold the live router uses
(:func:`~dsh_team.permissions.ledger.replay_permissions`), so what a run enforced
and what its log shows cannot differ. Open asks say what answers them
(``dsh team permit ID allow|deny``).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from dsh_team.permissions.ledger import PermissionsState

__all__ = ["ShowAsk", "PermissionsReport", "build_permissions", "render_permissions"]


class ShowAsk(msgspec.Struct, frozen=True):
    """One ask as the view shows it."""

    ask_id: str
    member: str
    tool: str
    arguments: str
    rule: str
    route: Literal["user", "lead"]
    deadline: int
    seq: int
    status: Literal["open", "allow", "deny"]
    by: str | None = None
    reason: str | None = None
    always: bool = False


class PermissionsReport(msgspec.Struct, frozen=True):
    """Asks in log order, each member's session rules, and the fold's failure (``None``: none)."""

    asks: tuple[ShowAsk, ...]
    session_rules: dict[str, tuple[str, ...]]
    failure: str | None = None


def build_permissions(state: PermissionsState) -> PermissionsReport | None:
    """The section, or ``None`` for a Team that never asked."""
    if not state.asks and state.failure is None:
        return None
    asks = []
    for ask in state.listed():
        request, answer = ask.request, ask.answer
        asks.append(ShowAsk(
            ask_id=request.ask_id, member=request.member, tool=request.tool, arguments=request.arguments,
            rule=request.rule, route=request.route, deadline=request.deadline, seq=ask.seq,
            status="open" if answer is None else answer.decision, by=None if answer is None else answer.by,
            reason=None if answer is None or not answer.reason else answer.reason,
            always=answer is not None and answer.always,
        ))  # fmt: skip
    return PermissionsReport(asks=tuple(asks), session_rules=dict(state.always.items()), failure=state.failure)


def _short(text: str, width: int = 70) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def render_permissions(report: PermissionsReport) -> list[str]:
    """The text block: one line per ask (open ones say how to answer them)."""
    lines = ["Permissions:"]
    if report.failure is not None:
        lines.append(f"  FAILURE (permissions): {report.failure}")
    for ask in report.asks:
        head = f"  {ask.ask_id} {ask.member}: {ask.tool} {_short(ask.arguments)} (rule {ask.rule}, asks {ask.route})"
        if ask.status == "open":
            lines.append(f"{head}: OPEN -- answer with `dsh team permit {ask.ask_id} allow|deny`")
        else:
            always = " always" if ask.always else ""
            reason = f": {_short(ask.reason)}" if ask.reason else ""
            lines.append(f"{head}: {ask.status}{always} by {ask.by}{reason}")
    return lines
