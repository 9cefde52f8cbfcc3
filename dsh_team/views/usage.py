"""Token usage per member, folded from the members' own session logs.

Every ``assistant/message`` an adapter answered may carry ``usage`` (input,
output and, where the server reports it, cached tokens) and ``model``. Folding
only a session's *own* events matters: a forked teammate's log starts with the
Lead's conversation, whose calls the Lead already paid for.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from host_spec.events import Event, EventType

__all__ = ["MemberUsage", "fold_usage"]


class MemberUsage(msgspec.Struct, frozen=True):
    """What one member's model calls cost.

    Attributes:
        calls: Assistant steps that reported usage.
        input_tokens, output_tokens, cached_tokens: Sums over those steps
            (``cached_tokens`` counts only servers that report it).
        model: The model of the latest step that named one (``KIND:MODEL``).
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    model: str | None = None


def fold_usage(own_events: Sequence[Event]) -> MemberUsage:
    """Sum the usage of ``own_events`` (pass ``events[header.seed_length:]``)."""
    calls = inputs = outputs = cached = 0
    model = None
    for event in own_events:
        if event.type != EventType.ASSISTANT_MESSAGE:
            continue
        value = event.value()
        model = value.get("model") or model
        usage = value.get("usage")
        if usage:
            calls += 1
            inputs += usage.get("input_tokens", 0)
            outputs += usage.get("output_tokens", 0)
            cached += usage.get("cached_tokens") or 0
    return MemberUsage(calls=calls, input_tokens=inputs, output_tokens=outputs, cached_tokens=cached, model=model)
