"""Budget decisions: which limit of :class:`~dsh_team.config.BudgetConfig` a spend has reached.

Pure functions over spends, so the live refusal, the spawn check and the tests'
oracle share one rule: a limit is *reached* once the counted spend is at or above
it (``used >= value``); member limits are checked before the Team's, tokens before
calls, and the first one reached names the refusal.
"""

from __future__ import annotations

from typing import Final

import attrs

from host_spec.messages import UserMessage, user_message

from dsh_team.config import BudgetConfig
from dsh_team.cost.records import COST_VERSION, BudgetRecord, LimitKind, Spend
from dsh_team.errors import TeamCode, TeamError

__all__ = [
    "BUDGET_SOURCE",
    "Limit",
    "member_limit",
    "team_limit",
    "first_reached",
    "budget_error",
    "budget_record",
    "limited",
    "notice",
    "notice_id",
]

#: ``source.kind`` of the Lead's budget notice.
BUDGET_SOURCE: Final = "team-budget"

_KINDS: Final[tuple[LimitKind, ...]] = ("tokens", "calls")


@attrs.frozen
class Limit:
    """A limit reached: whose (``member_id``; ``None`` = the Team's), what it counts, its value, the use."""

    member_id: str | None
    kind: LimitKind
    value: int
    used: int


def limited(budget: BudgetConfig) -> bool:
    """Whether any limit is set (no limit: nothing to check on the hot path)."""
    return any(value is not None for value in attrs.astuple(budget))


def _reached(member_id: str | None, limits: tuple[int | None, int | None], spend: Spend) -> Limit | None:
    for kind, value in zip(_KINDS, limits):
        if value is not None and spend.count(kind) >= value:
            return Limit(member_id, kind, value, spend.count(kind))
    return None


def member_limit(budget: BudgetConfig, member_id: str, spend: Spend) -> Limit | None:
    """The member limit ``spend`` (everything charged to ``member_id``) has reached, if any."""
    return _reached(member_id, (budget.member_tokens, budget.member_calls), spend)


def team_limit(budget: BudgetConfig, spend: Spend) -> Limit | None:
    """The Team limit the whole Team's ``spend`` has reached, if any."""
    return _reached(None, (budget.team_tokens, budget.team_calls), spend)


def first_reached(budget: BudgetConfig, member_id: str, member: Spend, team: Spend) -> Limit | None:
    """The limit that refuses ``member_id``'s next model call, if any (member limits first)."""
    return member_limit(budget, member_id, member) or team_limit(budget, team)


def budget_error(limit: Limit, who: str) -> TeamError:
    """``TEAM_BUDGET_EXCEEDED`` for ``limit`` (``who`` names the member, or the Team)."""
    scope = f"{who}'s" if limit.member_id is not None else "the Team's"
    return TeamError(
        f"{scope} {limit.kind} budget is used up ({limit.used} of {limit.value}): no new model calls until "
        "the limit is raised in the profile and the run resumed; queued mail stays queued",
        TeamCode.BUDGET_EXCEEDED,
        kind=limit.kind,
        value=limit.value,
        used=limit.used,
        member_id=limit.member_id,
    )


def budget_record(team_id: str, limit: Limit) -> BudgetRecord:
    """The ``team/budget`` record of ``limit`` reached."""
    return BudgetRecord(
        version=COST_VERSION, team_id=team_id, kind=limit.kind, value=limit.value, used=limit.used,
        member_id=limit.member_id,
    )  # fmt: skip


def notice_id(team_id: str, seq: int) -> str:
    """The id of the Lead's notice of the ``team/budget`` record at ``seq`` (its de-duplication key)."""
    return f"budget-{team_id}-{seq}"


def notice(team_id: str, seq: int, record: BudgetRecord, name: str) -> UserMessage:
    """What the Lead is told about the budget record at ``seq`` (``name``: the member whose limit it is)."""
    who = "The Team" if record.member_id is None else f"Member {name}"
    text = (
        f"Team budget: {who} reached its {record.kind} limit ({record.used} of {record.value}). "
        "Its model calls are refused until the limit is raised in the profile and the run is resumed; "
        "queued mail stays queued."
    )
    source = {"kind": BUDGET_SOURCE, "team_id": team_id, "seq": seq}
    return user_message(text, source=source, id=notice_id(team_id, seq))
