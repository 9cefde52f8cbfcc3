"""The cost ledger's durable records: ``team/cost`` (a charge) and ``team/budget`` (a limit reached).

Both live in the Lead log next to the Team records but are folded by the cost
ledger (:mod:`dsh_team.cost.ledger`), not by the Team fold: a charge is written
once per model call, and it must neither move the Team's wait position nor take
part in the roster, board and mailbox rules.

* A **charge** covers the charged member's own ``assistant/message`` events with
  seqs in ``(previous charge's seq, seq]`` of that member's log, and names the task
  the spend belongs to (``None``: the member's own). Live, one charge is written per
  model call; after a crash one charge covers whatever the member's log holds
  beyond its last recorded charge.
* A **budget** record says a limit was reached, once per limit value: the
  Lead was told, and raising the limit (a new value) can be reached and told again.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from dsh_team.config import MAX_SAFE_INTEGER

__all__ = [
    "COST_VERSION",
    "TEAM_COST",
    "TEAM_BUDGET",
    "COST_EVENT_TYPES",
    "Spend",
    "ChargeRecord",
    "BudgetRecord",
    "LimitKind",
    "added",
    "decode_cost",
]

COST_VERSION: Final = 1
TEAM_COST: Final = "team/cost"
TEAM_BUDGET: Final = "team/budget"
COST_EVENT_TYPES: Final = frozenset({TEAM_COST, TEAM_BUDGET})

_Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]
_Positive = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]
_Id = Annotated[str, msgspec.Meta(min_length=1)]

#: What a limit counts: tokens (input + output) or model calls.
LimitKind = Literal["tokens", "calls"]


class Spend(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What some model calls cost, as their servers reported it.

    Attributes:
        calls: Model calls whose reply reported usage.
        input_tokens, output_tokens, cached_tokens: Their sums (``cached_tokens``
            is part of ``input_tokens`` where a server reports it).
    """

    calls: _Count = 0
    input_tokens: _Count = 0
    output_tokens: _Count = 0
    cached_tokens: _Count = 0

    @property
    def tokens(self) -> int:
        """Input plus output tokens: what a token budget counts."""
        return self.input_tokens + self.output_tokens

    def count(self, kind: LimitKind) -> int:
        """``tokens`` or ``calls``."""
        return self.tokens if kind == "tokens" else self.calls


def added(left: Spend, right: Spend) -> Spend:
    """The spend of both."""
    return Spend(
        left.calls + right.calls,
        left.input_tokens + right.input_tokens,
        left.output_tokens + right.output_tokens,
        left.cached_tokens + right.cached_tokens,
    )


class ChargeRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Payload of ``team/cost``: a member's spend up to ``seq`` of its own log, charged to ``task_id``."""

    version: _Count
    team_id: _Id
    member_id: _Id
    seq: _Positive
    spend: Spend
    task_id: _Id | None = None


class BudgetRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Payload of ``team/budget``: ``used`` reached the limit ``value`` of ``kind``.

    ``member_id`` names the member whose limit it is; ``None`` is the Team's limit.
    """

    version: _Count
    team_id: _Id
    kind: LimitKind
    value: _Positive
    used: _Count
    member_id: _Id | None = None


_DECODERS: Final[dict[str, msgspec.json.Decoder[ChargeRecord] | msgspec.json.Decoder[BudgetRecord]]] = {
    TEAM_COST: msgspec.json.Decoder(ChargeRecord),
    TEAM_BUDGET: msgspec.json.Decoder(BudgetRecord),
}


def decode_cost(event_type: str, data: bytes | msgspec.Raw) -> ChargeRecord | BudgetRecord:
    """Strictly decode a cost record.

    Raises:
        KeyError: not a cost event type.
        msgspec.DecodeError: malformed payload (``ValidationError`` included).
    """
    record: ChargeRecord | BudgetRecord = _DECODERS[event_type].decode(data)
    return record
