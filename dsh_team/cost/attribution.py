"""The attribution rule: which spend a model call is, and whose it is.

* A model call's spend is the ``usage`` it reported: a reply (``assistant/message``)
  or a compaction summary (``context/compacted``); a call without usage costs
  nothing here (it is not counted as a call either).
* It is charged to the task its member owns *in progress* in the Team's folded
  state at the moment the Team records the charge; when the member owns several,
  the first in board order; when it owns none, to the member itself.

Only a session's own events are spend: a forked teammate's seed repeats the Lead's
calls, which the Lead already paid for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from host_spec.events import Event, EventType

from dsh_team.core.state import TeamState
from dsh_team.core.event_filter import of_types
from dsh_team.cost.records import Spend, added

if TYPE_CHECKING:
    from host_spec.protocols import Session

__all__ = ["call_spend", "charged_task", "own_tail", "spend_after"]


class _Usage(msgspec.Struct):
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None


class _Reply(msgspec.Struct):
    """Only the usage of a model call's event (its content is skipped)."""

    usage: _Usage | None = None


_REPLY: Final = msgspec.json.Decoder(_Reply)
_CALLS: Final = frozenset({EventType.ASSISTANT_MESSAGE, EventType.CONTEXT_COMPACTED})


def call_spend(event: Event) -> Spend | None:
    """The spend of one event: a model call's reply or summary that reported usage, else ``None``."""
    if event.type not in _CALLS:
        return None
    try:
        usage = _REPLY.decode(event.data).usage
    except msgspec.DecodeError:
        return None
    if usage is None:
        return None
    return Spend(1, usage.input_tokens, usage.output_tokens, usage.cached_tokens or 0)


def spend_after(own_events: Sequence[Event], after_seq: int) -> tuple[Spend, int]:
    """The spend of ``own_events`` with seq > ``after_seq``, and the last such call's seq (0: none).

    A cold-resumed Lead's whole log may be scanned here once, so the events that are
    no model call (nearly all of a long Team log) are passed over in C: only the
    calls reach a Python step.
    """
    total = Spend()
    last = 0
    for event in of_types(own_events, _CALLS):
        if event.seq <= after_seq:
            continue
        spend = call_spend(event)
        if spend is not None:
            total = added(total, spend)
            last = event.seq
    return total, last


def own_tail(session: Session, after: int) -> Sequence[Event]:
    """A live session's own events with seq > ``after`` (seqs run 1, 2, ...: they start at index ``after``)."""
    return session.events[max(session.header.seed_length, after) :]


def charged_task(state: TeamState, member_id: str) -> str | None:
    """The task a call of ``member_id`` is charged to now (see the module docstring)."""
    for task in state.tasks.in_progress():
        if task.owner_id == member_id:
            return task.id
    return None
