"""Team entity snapshots: the whole value of a member, a task or a message as records carry it.

A record never carries a diff: every roster, task or mail record holds the full
current value of its entity, so the fold replaces instead of merging and a reader
of any single record sees the entity whole. These are those values, and the
constrained field types (non-empty ids, counts inside the JSON safe-integer
range) that every Team record shares. Like the records around them they are
strict (``forbid_unknown_fields``): replay must reject a value it does not fully
understand instead of guessing.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

from dsh_team.config import MAX_SAFE_INTEGER
from dsh_team.core.content import validate_content

__all__ = [
    "NonEmpty",
    "SafeCount",
    "SafePositive",
    "MemberPhase",
    "TaskStatus",
    "TeamMemberSnapshot",
    "TeamTaskSnapshot",
    "TeamMessageSnapshot",
    "numeric_task_number",
]

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
SafeCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]
SafePositive = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]

MemberPhase = Literal["provisioning", "active", "failed"]
TaskStatus = Literal["pending", "in_progress", "completed", "deleted"]

_TASK_PREFIX: Final = "task-"


def numeric_task_number(task_id: str) -> int | None:
    """``n`` for a standard id ``task-<n>`` (``n`` >= 1, no leading zero), else ``None``.

    The number may exceed the safe range here; :class:`TeamTaskSnapshot` rejects
    such ids while decoding.
    """
    if not task_id.startswith(_TASK_PREFIX):
        return None
    digits = task_id[5:]
    if not digits or not digits.isascii() or not digits.isdigit() or digits[0] == "0":
        return None
    return int(digits)

# Snapshots and records are built with ``gc=False``: they hold only strings, numbers
# and JSON values, so they can never be part of a reference cycle, and a long-lived
# Team's folded state (its open messages, its tasks) costs the cyclic collector nothing.


class TeamMemberSnapshot(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """One roster record: a teammate's identity and provisioning phase."""

    id: NonEmpty
    name: NonEmpty
    description: str
    provider: str
    context: Literal["fresh", "fork"]
    phase: MemberPhase
    error: str | None = None


class TeamTaskSnapshot(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """A whole task value; every mutation writes the next ``revision`` in full."""

    id: NonEmpty
    revision: SafePositive
    subject: str
    description: str
    status: TaskStatus
    blocked_by: tuple[NonEmpty, ...]
    write_scopes: tuple[str, ...]
    owner_id: NonEmpty | None = None
    #: Quality checks completing it must pass (commands or profile check names); absent: none.
    checks: tuple[NonEmpty, ...] = ()

    def __post_init__(self) -> None:
        # Only ids longer than "task-" + 15 digits can leave the safe range.
        if len(self.id) > 20:
            number = numeric_task_number(self.id)
            if number is not None and number > MAX_SAFE_INTEGER:
                raise ValueError(f"task id {self.id} is outside the safe integer range")


class TeamMessageSnapshot(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A queued peer message; ``content`` is the sender's blocks without the frame."""

    id: NonEmpty
    sender_id: NonEmpty
    sender_name: str
    target_id: NonEmpty
    content: tuple[dict[str, Any], ...]

    def __post_init__(self) -> None:
        validate_content(self.content)
