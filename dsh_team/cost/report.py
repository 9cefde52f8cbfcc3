"""The cost section of ``dsh team show`` and the web panel: the ledger as rows.

Every number comes from the Lead log's charges (:mod:`dsh_team.cost.ledger`), the
same ones the live service folds, so a view of a run's logs shows what its live
Team reported. ``uncharged`` is the one figure read from the members' own logs
(:func:`dsh_team.views.usage.uncharged_spend`):
spend recorded after the member's last charge (a crash lost the charge before it
was durable; it is charged when the member starts again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from host_spec.events import Event

from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.core.tombstones import restore
from dsh_team.cost.ledger import NOTHING, CostLedger
from dsh_team.cost.records import LimitKind, Spend

__all__ = ["MemberCost", "MemberSpend", "TaskSpend", "LimitReached", "CostReport", "build_report"]


class MemberCost(msgspec.Struct, frozen=True):
    """A member's spend as a roster row shows it; ``exceeded``: a limit refuses its next model call."""

    spend: Spend = NOTHING
    exceeded: bool = False


class MemberSpend(msgspec.Struct, frozen=True):
    """One member's charged spend: ``total`` = ``on_tasks`` + ``own``; ``uncharged`` is not in ``total``."""

    member_id: str
    name: str
    total: Spend
    on_tasks: Spend
    own: Spend
    uncharged: Spend | None = None


class TaskSpend(msgspec.Struct, frozen=True):
    """What was charged to one task (by any member), with its subject and status when it still exists."""

    task_id: str
    subject: str | None
    status: str | None
    spend: Spend


class LimitReached(msgspec.Struct, frozen=True):
    """A ``team/budget`` record: ``member_id``/``name`` ``None`` is the Team's limit."""

    seq: int
    kind: LimitKind
    value: int
    used: int
    member_id: str | None
    name: str | None


class CostReport(msgspec.Struct, frozen=True):
    """The whole cost section.

    Attributes:
        team: Everything charged in the Team.
        members: Lead first, then teammates in roster order.
        tasks: Tasks with a charge, in board order (deleted ones included).
        reached: Every limit reached, oldest first.
        failure: Why the ledger stopped folding (``None``: it did not).
    """

    team: Spend
    members: tuple[MemberSpend, ...]
    tasks: tuple[TaskSpend, ...]
    reached: tuple[LimitReached, ...]
    failure: str | None = None


def _less(total: Spend, part: Spend) -> Spend:
    return Spend(
        total.calls - part.calls,
        total.input_tokens - part.input_tokens,
        total.output_tokens - part.output_tokens,
        total.cached_tokens - part.cached_tokens,
    )


def build_report(
    state: TeamState, ledger: CostLedger, uncharged: Mapping[str, Spend] | None = None,
    events: Sequence[Event] | None = None,
) -> CostReport:
    """The cost section of ``state``'s Team from its ``ledger`` (``uncharged`` by member id, when read).

    ``events`` is the Lead log ``state`` was folded from: a deleted task's subject
    is read from its deleting record there (the board keeps a tombstone, whose
    subject is empty: without ``events`` that is what the report shows).
    """
    names = {state.team_id: LEAD_NAME, **{m.id: m.name for m in state.members.listed()}}
    members = []
    for member_id, name in names.items():
        total = ledger.member(member_id)
        own = ledger.own.get(member_id, NOTHING)
        extra = uncharged.get(member_id) if uncharged is not None else None
        members.append(MemberSpend(member_id, name, total, _less(total, own), own, extra))
    order = state.tasks.order
    tasks = []
    for task_id in sorted(ledger.tasks.keys(), key=lambda key: (order.get(key, len(order)), key)):
        task = state.tasks.tasks.get(task_id)
        if task is not None and events is not None:
            task = restore(state, task, events)
        subject, status = (task.subject, task.status) if task is not None else (None, None)
        tasks.append(TaskSpend(task_id, subject, status, ledger.task(task_id)))
    reached = tuple(
        LimitReached(seq, r.kind, r.value, r.used, r.member_id, names.get(r.member_id) if r.member_id else None)
        for seq, r in ledger.reached
    )
    return CostReport(ledger.team, tuple(members), tuple(tasks), reached, ledger.failure)

