"""Token usage per member, folded from the members' own session logs.

Every ``assistant/message`` an adapter answered may carry ``usage`` (input,
output and, where the server reports it, cached tokens) and ``model``; so may a
``context/compacted`` record, for the call that wrote its summary. Folding
only a session's *own* events matters: a forked teammate's log starts with the
Lead's conversation, whose calls the Lead already paid for.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import msgspec

from host_spec.cli import SessionReader
from host_spec.errors import SessionError
from host_spec.events import Event, EventType

from dsh_team.cost.attribution import spend_after
from dsh_team.cost.ledger import CostLedger
from dsh_team.cost.records import Spend

__all__ = ["MemberUsage", "fold_usage", "added", "member_usage", "uncharged_spend"]


class MemberUsage(msgspec.Struct, frozen=True):
    """What one member's model calls cost.

    Attributes:
        calls: Assistant steps that reported usage.
        input_tokens, output_tokens, cached_tokens: Sums over those steps
            (``cached_tokens`` counts only servers that report it).
        model: The model of the latest step that named one (``KIND:MODEL``).
        compactions: How many times the member's context was compacted (each
            summary call that reported usage is one of ``calls``).
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    model: str | None = None
    compactions: int = 0


def fold_usage(own_events: Sequence[Event]) -> MemberUsage:
    """Sum the usage of ``own_events`` (pass ``events[header.seed_length:]``)."""
    calls = inputs = outputs = cached = compactions = 0
    model = None
    for event in own_events:
        if event.type == EventType.CONTEXT_COMPACTED:
            compactions += 1
        elif event.type != EventType.ASSISTANT_MESSAGE:
            continue
        value = event.value()
        model = value.get("model") or model
        usage = value.get("usage")
        if usage:
            calls += 1
            inputs += usage.get("input_tokens", 0)
            outputs += usage.get("output_tokens", 0)
            cached += usage.get("cached_tokens") or 0
    return MemberUsage(calls=calls, input_tokens=inputs, output_tokens=outputs, cached_tokens=cached, model=model,
                       compactions=compactions)


def added(earlier: MemberUsage, later: MemberUsage) -> MemberUsage:
    """The usage of two consecutive stretches of one log (``later`` names the newer model)."""
    return MemberUsage(
        calls=earlier.calls + later.calls,
        input_tokens=earlier.input_tokens + later.input_tokens,
        output_tokens=earlier.output_tokens + later.output_tokens,
        cached_tokens=earlier.cached_tokens + later.cached_tokens,
        model=later.model or earlier.model,
        compactions=earlier.compactions + later.compactions,
    )


def member_usage(reader: SessionReader, session_ids: list[str], *, until: int | None = None) -> dict[str, MemberUsage]:
    """Usage folded from each session's own events (at or before ``until`` ms when given).

    An unreadable log is left out (shown ``null``).
    """
    return {
        session_id: fold_usage(own if until is None else [e for e in own if e.time <= until])
        for session_id, own in _own_logs(reader, session_ids)
    }


def uncharged_spend(reader: SessionReader, session_ids: list[str], ledger: CostLedger) -> dict[str, Spend]:
    """Each member's own spend after its last charge in ``ledger`` (a crash lost those charges).

    An unreadable log is left out (shown ``null``).
    """
    return {session_id: spend_after(own, ledger.last_charged(session_id))[0] for session_id, own in _own_logs(reader, session_ids)}


def _own_logs(reader: SessionReader, session_ids: list[str]) -> Iterator[tuple[str, Sequence[Event]]]:
    """``(session id, own events)`` of every readable session of ``session_ids``."""
    for session_id in session_ids:
        try:
            stored = reader.read(session_id, salvage=True)
        except SessionError:
            continue
        yield session_id, stored.events[stored.header.seed_length :]
