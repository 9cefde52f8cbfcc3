"""The controls' durable records: quality-gate runs (``team/check/*``) and plan approval (``team/plan``).

They live in the Lead log beside the Team records but are folded by the controls
fold (:mod:`dsh_team.controls.ledger`), not the Team fold: a gate run or a plan
decision is no roster, board or mailbox change, and the Team fold's state and
rules stay as they are. Each record carries its :data:`CONTROLS_VERSION`; payloads
are strict (``forbid_unknown_fields``) like every Team record, so replay refuses
what it does not fully understand.

* ``team/check/started``: a member asked to complete ``task_id`` at ``revision``
  and the gates it must pass (the task's checks, then the Team's ``on_complete``
  gates) are about to run. Durable *before* the first command starts, so a crash
  during a check leaves a run that was started and never finished: the service
  runs it again on resume, and only a passing finish completes the task.
* ``team/check/finished``: how that run ended, each command's exit code and the
  tail of its output.
* ``team/plan``: one step of a teammate's plan approval, keyed by the member's
  name (names are never reused in a Team): ``required`` (written before the
  teammate exists), ``submitted`` (its plan), ``approved`` or ``rejected``
  (with feedback) by the Lead or the user.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

import msgspec

from dsh_team.config import MAX_SAFE_INTEGER

__all__ = [
    "CONTROLS_VERSION",
    "TEAM_CHECK_STARTED",
    "TEAM_CHECK_FINISHED",
    "TEAM_PLAN",
    "CONTROL_EVENT_TYPES",
    "CheckStep",
    "how_it_ended",
    "CheckResult",
    "CheckStartedRecord",
    "CheckFinishedRecord",
    "PlanAction",
    "PlanRecord",
    "ControlRecord",
    "decode_control",
]

CONTROLS_VERSION: Final = 1
TEAM_CHECK_STARTED: Final = "team/check/started"
TEAM_CHECK_FINISHED: Final = "team/check/finished"
TEAM_PLAN: Final = "team/plan"
CONTROL_EVENT_TYPES: Final = frozenset({TEAM_CHECK_STARTED, TEAM_CHECK_FINISHED, TEAM_PLAN})

_Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]
_Positive = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]
_Id = Annotated[str, msgspec.Meta(min_length=1)]
_STRICT: Final[Mapping[str, Any]] = MappingProxyType(
    {"frozen": True, "forbid_unknown_fields": True, "omit_defaults": True, "gc": False}
)

#: The steps of plan approval, in the order a plan goes through them.
PlanAction = Literal["required", "submitted", "approved", "rejected"]


class CheckStep(msgspec.Struct, **_STRICT):
    """One gate to pass: the command, and the profile check name it came from (``None``: a literal command)."""

    command: _Id
    name: _Id | None = None


class CheckResult(msgspec.Struct, **_STRICT):
    """How one command of a run ended.

    Attributes:
        command: The command run.
        name: The profile check it came from (``None``: a literal command).
        exit_code: Its exit status; ``None`` when it was killed.
        timed_out, interrupted: Why it was killed.
        tail: The last part of its output (what the member needs to fix it).
        timeout_ms: The limit it ran out of (a timed-out command only), so every
            view can say "timed out after N s" from the record alone.
    """

    command: _Id
    exit_code: int | None
    name: _Id | None = None
    tail: str = ""
    timed_out: bool = False
    interrupted: bool = False
    timeout_ms: int | None = None


def how_it_ended(result: CheckResult) -> str:
    """``timed out after N s`` / ``was interrupted`` / ``exited N``: one command's end, in words."""
    if result.timed_out:
        return f"timed out after {result.timeout_ms / 1000:g} s" if result.timeout_ms is not None else "timed out"
    if result.interrupted:
        return "was interrupted"
    return f"exited {result.exit_code}" if result.exit_code is not None else "did not run"


class CheckStartedRecord(msgspec.Struct, **_STRICT):
    """Payload of ``team/check/started``: ``member`` asked to complete ``task_id`` at ``revision``."""

    version: _Count
    team_id: _Id
    run_id: _Id
    task_id: _Id
    revision: _Positive
    member: _Id
    steps: tuple[CheckStep, ...]


class CheckFinishedRecord(msgspec.Struct, **_STRICT):
    """Payload of ``team/check/finished``: the run's outcome (``passed``: every step exited 0).

    ``results`` holds one entry per step run, in order; the run stops at the first
    failing step, so a failed run's last result is the failure. ``rerun`` marks a
    run finished by recovery after a crash interrupted it.
    """

    version: _Count
    team_id: _Id
    run_id: _Id
    passed: bool
    results: tuple[CheckResult, ...]
    rerun: bool = False


class PlanRecord(msgspec.Struct, **_STRICT):
    """Payload of ``team/plan``: one step of ``member``'s plan approval.

    ``text`` is the plan (``submitted``) or the feedback (``approved``, ``rejected``);
    ``by`` names who decided (``lead`` or ``user``; the member itself for a submission).
    """

    version: _Count
    team_id: _Id
    member: _Id
    action: PlanAction
    by: _Id
    text: str = ""


ControlRecord = CheckStartedRecord | CheckFinishedRecord | PlanRecord

_DECODERS: Final[Mapping[str, msgspec.json.Decoder[Any]]] = {
    TEAM_CHECK_STARTED: msgspec.json.Decoder(CheckStartedRecord),
    TEAM_CHECK_FINISHED: msgspec.json.Decoder(CheckFinishedRecord),
    TEAM_PLAN: msgspec.json.Decoder(PlanRecord),
}


def decode_control(event_type: str, data: bytes | msgspec.Raw) -> ControlRecord:
    """Strictly decode a controls record.

    Raises:
        KeyError: not a controls event type.
        msgspec.DecodeError: malformed payload (``ValidationError`` included).
    """
    record: ControlRecord = _DECODERS[event_type].decode(data)
    return record
