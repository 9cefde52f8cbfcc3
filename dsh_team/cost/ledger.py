"""The cost ledger: a pure fold of the Lead log's ``team/cost`` and ``team/budget`` records.

The live service and ``dsh team show`` both fold with :func:`fold_cost`, so the
totals a running Team reports and the ones its logs show cannot disagree. The
ledger is immutable (:class:`immutables.Map` collections, one event costs
O(log n)), kept beside the Team state rather than inside it: cost records do not
move the Team's wait position and never break the Team stream.

Rules: a record of another Team is ignored; a malformed record, an unknown
``version`` or a charge that does not advance its member's ``seq`` makes the
ledger ``failed`` (terminal, the totals stay the last valid ones), which the
views show; a budget record already folded for the same member, kind and value
is a failure too (the writer decides each once).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import immutables
import msgspec
import structlog

from host_spec.events import Event

from dsh_team.core.event_filter import of_types
from dsh_team.cost.records import (
    COST_EVENT_TYPES,
    COST_VERSION,
    TEAM_COST,
    BudgetRecord,
    ChargeRecord,
    LimitKind,
    Spend,
    added,
    decode_cost,
)

__all__ = ["NOTHING", "CostLedger", "LimitKey", "LiveLedgers", "limit_key", "fold_cost", "replay_costs"]

if TYPE_CHECKING:
    from host_spec.protocols import Session

log = structlog.get_logger(__name__)

#: No spend at all.
NOTHING: Final = Spend()
_EMPTY: Final[immutables.Map[Any, Any]] = immutables.Map()

#: ``(member id or "" for the Team, kind, limit value)``: what one budget record decides.
LimitKey = tuple[str, LimitKind, int]


def limit_key(member_id: str | None, kind: LimitKind, value: int) -> LimitKey:
    """The de-duplication key of a limit reached."""
    return (member_id or "", kind, value)


class CostLedger(msgspec.Struct, frozen=True, gc=False):
    """What a Team's model calls cost, as of its last folded cost record.

    Attributes:
        team_id: The Lead session id.
        members: member id -> everything charged to it (its tasks included).
        own: member id -> the part charged to no task.
        tasks: task id -> everything charged to the task (any member).
        team: The whole Team's spend.
        charged: member id -> the last own-log seq a charge covered.
        reached: Every limit reached, in log order: ``(seq, record)``.
        keys: The keys of ``reached`` (de-duplication).
        failure: Why the ledger stopped folding (``None``: it did not).
    """

    team_id: str
    members: immutables.Map[str, Spend] = _EMPTY
    own: immutables.Map[str, Spend] = _EMPTY
    tasks: immutables.Map[str, Spend] = _EMPTY
    team: Spend = NOTHING
    charged: immutables.Map[str, int] = _EMPTY
    reached: tuple[tuple[int, BudgetRecord], ...] = ()
    keys: frozenset[LimitKey] = frozenset()
    failure: str | None = None

    def member(self, member_id: str) -> Spend:
        """Everything charged to ``member_id``."""
        return self.members.get(member_id, NOTHING)

    def task(self, task_id: str) -> Spend:
        """Everything charged to ``task_id``."""
        return self.tasks.get(task_id, NOTHING)

    def last_charged(self, member_id: str) -> int:
        """The last own-log seq of ``member_id`` a charge covered (0: none)."""
        return self.charged.get(member_id, 0)


def _fail(ledger: CostLedger, message: str, seq: int) -> CostLedger:
    return msgspec.structs.replace(ledger, failure=f"seq {seq}: {message}")


def _charge(ledger: CostLedger, record: ChargeRecord, seq: int) -> CostLedger:
    member_id = record.member_id
    if record.seq <= ledger.last_charged(member_id):
        return _fail(ledger, f"a charge of {member_id} does not advance past seq {record.seq}", seq)
    spend = record.spend
    members = ledger.members.set(member_id, added(ledger.member(member_id), spend))
    own, tasks = ledger.own, ledger.tasks
    if record.task_id is None:
        own = own.set(member_id, added(own.get(member_id, NOTHING), spend))
    else:
        tasks = tasks.set(record.task_id, added(ledger.task(record.task_id), spend))
    return msgspec.structs.replace(
        ledger,
        members=members,
        own=own,
        tasks=tasks,
        team=added(ledger.team, spend),
        charged=ledger.charged.set(member_id, record.seq),
    )


def _budget(ledger: CostLedger, record: BudgetRecord, seq: int) -> CostLedger:
    key = limit_key(record.member_id, record.kind, record.value)
    if key in ledger.keys:
        return _fail(ledger, f"the {record.kind} limit {record.value} was reached twice", seq)
    return msgspec.structs.replace(ledger, reached=(*ledger.reached, (seq, record)), keys=ledger.keys | {key})


def fold_cost(ledger: CostLedger, event: Event) -> CostLedger:
    """Fold one event (pure). Returns ``ledger`` itself when the event is no cost record of this Team."""
    if ledger.failure is not None or event.type not in COST_EVENT_TYPES:
        return ledger
    try:
        record = decode_cost(event.type, event.data)
    except msgspec.DecodeError as exc:
        return _fail(ledger, f"invalid {event.type} payload ({exc})", event.seq)
    if record.team_id != ledger.team_id:
        return ledger
    if record.version != COST_VERSION:
        return _fail(ledger, f"unsupported {event.type} version {record.version}", event.seq)
    if event.type == TEAM_COST:
        assert isinstance(record, ChargeRecord)
        return _charge(ledger, record, event.seq)
    assert isinstance(record, BudgetRecord)
    return _budget(ledger, record, event.seq)


def replay_costs(events: Iterable[Event], team_id: str, ledger: CostLedger | None = None) -> CostLedger:
    """Fold a whole Lead log, or its tail after ``ledger`` (``dsh team show``; the service folds incrementally)."""
    ledger = CostLedger(team_id) if ledger is None else ledger
    for event in events:
        ledger = fold_cost(ledger, event)
    return ledger


class LiveLedgers:
    """The ledger of each live Lead session, folded incrementally (each event once, never a re-scan)."""

    def __init__(self) -> None:
        #: Lead session id -> (session object, events folded, ledger).
        self._by_id: dict[str, tuple[Session, int, CostLedger]] = {}

    def ledger(self, session: Session) -> CostLedger:
        """``session``'s ledger up to its last event; a new session object (a resume) is folded afresh."""
        entry = self._by_id.get(session.id)
        start, ledger = (entry[1], entry[2]) if entry is not None and entry[0] is session else (0, CostLedger(session.id))
        count = session.last_seq
        if start < count:
            before = ledger.failure
            # Only cost records fold; they are picked out in C, so a Lead's long log costs
            # no Python step per other event (the result is fold_cost over every event).
            tail = session.events[start:count]
            for event in of_types(tail, COST_EVENT_TYPES):
                ledger = fold_cost(ledger, event)
            self._by_id[session.id] = (session, count, ledger)
            if ledger.failure is not None and before is None:
                log.error("team.cost_ledger_failed", team=session.id, error=ledger.failure)
        return ledger

    def restore(self, session: Session, count: int, ledger: CostLedger) -> None:
        """Continue ``session``'s ledger from ``ledger``, the fold of its first ``count`` events (a checked checkpoint)."""
        self._by_id[session.id] = (session, count, ledger)

    def forget(self, session: Session) -> None:
        """Drop ``session``'s ledger (it left the live store)."""
        entry = self._by_id.get(session.id)
        if entry is not None and entry[0] is session:
            del self._by_id[session.id]
