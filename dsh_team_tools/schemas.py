"""Argument and result types of the nine Team tools (msgspec Structs).

These Structs are both the validator of every model call (unknown fields are
rejected) and the source of the JSON Schema the model reads, so descriptions
here are paid for on every model step: they stay short and exact. Optional
arguments use ``UNSET`` rather than ``None`` so the schema does not invite
``null`` and the adapters forward only what the model actually sent.

Some bounds are deliberately *not* enforced by the Struct: ``timeout_ms`` must
reach the service so its ``TEAM_INVALID_TIMEOUT`` is what the model sees, and
``cursor``/``limit`` get the tool's own plain messages. Their ranges still
appear in the schema through ``extra_json_schema``.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

# The service's bounds, shown in the schema; the task status is the durable record's.
from dsh_team import MAX_SAFE_INTEGER, WAIT_MAX_MS, WAIT_MIN_MS, TaskStatus, TeamDelta

__all__ = [
    "WAIT_DEFAULT_MS",
    "WAIT_MIN_MS",
    "WAIT_MAX_MS",
    "LIST_DEFAULT_LIMIT",
    "LIST_MAX_LIMIT",
    "MAX_SAFE_INTEGER",
    "TaskAction",
    "SpawnTeammateArgs",
    "SendMessageArgs",
    "ListAgentsArgs",
    "WaitAgentArgs",
    "InterruptAgentArgs",
    "TeamTaskCreateArgs",
    "TeamTaskListArgs",
    "TeamTaskGetArgs",
    "TeamTaskUpdateArgs",
    "MemberRow",
    "MemberListResult",
    "SpawnTeammateResult",
    "SendMessageResult",
    "StalledTaskRow",
    "StalledWork",
    "WaitAgentResult",
    "InterruptAgentResult",
    "TaskRow",
    "TaskListResult",
]

WAIT_DEFAULT_MS: Final = 30_000
LIST_DEFAULT_LIMIT: Final = 50
LIST_MAX_LIMIT: Final = 100

TaskAction = Literal["claim", "release", "edit", "set_dependencies", "complete", "reopen", "reassign", "delete"]
ListableStatus = Literal["pending", "in_progress", "completed"]

_Target = Annotated[str, Meta(description="Member target from list_agents, or lead")]
_TaskId = Annotated[str, Meta(description="Task id")]
_TaskIds = Annotated[list[str], Meta(description="Ids of tasks that must complete first")]
_Scopes = Annotated[list[str], Meta(description="Workspace-relative paths the task edits")]


class _Args(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every argument Struct: a call with an unknown field is an error, not a guess."""


class _Result(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every result Struct: the declared output is complete and closed."""


# ---------------------------------------------------------------- arguments


class SpawnTeammateArgs(_Args, frozen=True):
    """``spawn_teammate``: the Lead creates one named teammate with a first task."""

    name: Annotated[str, Meta(description="Unique lower-kebab-case name")]
    description: Annotated[str, Meta(description="Short role label")]
    prompt: Annotated[str, Meta(description="First task for the teammate")]
    context: Annotated[Literal["fresh", "fork"], Meta(description="fork copies your conversation")] = "fresh"
    plan_approval: Annotated[bool, Meta(description="Writes need your plan approval")] | UnsetType = UNSET
    role: Annotated[str, Meta(description="Role preset name")] | UnsetType = UNSET


class SendMessageArgs(_Args, frozen=True):
    """``send_message``: one text message to one member."""

    target: _Target
    message: str
    plan: Literal["submit", "approve", "reject"] | UnsetType = UNSET
    shutdown: Literal["request", "approve", "decline"] | UnsetType = UNSET
    permission: Annotated[str, Meta(description="Permission request id to answer")] | UnsetType = UNSET
    answer: Literal["allow", "always", "deny"] | UnsetType = UNSET


class ListAgentsArgs(_Args, frozen=True):
    """``list_agents`` takes no arguments."""


class WaitAgentArgs(_Args, frozen=True):
    """``wait_agent``: ranges are checked by the service (``TEAM_INVALID_TIMEOUT``, ``TEAM_INVALID_ARGUMENT``).

    ``since`` is a ``position`` from an earlier result: a change after it ends the
    wait at once, so a change between that read and this wait is never missed,
    and the result's ``changes`` says what changed after it.
    """

    timeout_ms: Annotated[int, Meta(extra_json_schema={"minimum": WAIT_MIN_MS, "maximum": WAIT_MAX_MS})] = WAIT_DEFAULT_MS
    since: Annotated[int, Meta(description="position you last saw", extra_json_schema={"minimum": 0})] | UnsetType = UNSET


class InterruptAgentArgs(_Args, frozen=True):
    """``interrupt_agent``: stop one teammate's current turn."""

    target: _Target


class TeamTaskCreateArgs(_Args, frozen=True):
    """``team_task_create``: omitted lists are not sent to the service."""

    subject: str
    description: str
    blocked_by: _TaskIds | UnsetType = UNSET
    write_scopes: _Scopes | UnsetType = UNSET
    checks: Annotated[list[str], Meta(description="Commands to pass to complete")] | UnsetType = UNSET


class TeamTaskListArgs(_Args, frozen=True):
    """``team_task_list``: filters plus cursor paging; cursor/limit are range-checked by the tool."""

    status: ListableStatus | UnsetType = UNSET
    owner: Annotated[str, Meta(description="Owner target, or unowned")] | UnsetType = UNSET
    ready: bool | UnsetType = UNSET
    cursor: Annotated[int, Meta(extra_json_schema={"minimum": 0})] = 0
    limit: Annotated[int, Meta(extra_json_schema={"minimum": 1, "maximum": LIST_MAX_LIMIT})] = LIST_DEFAULT_LIMIT


class TeamTaskGetArgs(_Args, frozen=True):
    """``team_task_get``: one task, deleted tombstones included."""

    task_id: _TaskId


class TeamTaskUpdateArgs(_Args, frozen=True):
    """``team_task_update``: compare-and-set on ``expected_revision``; only sent fields are forwarded."""

    task_id: _TaskId
    expected_revision: Annotated[int, Meta(description="The task's current revision")]
    action: TaskAction
    subject: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    blocked_by: Annotated[list[str], Meta(description="Complete blocker list (set_dependencies)")] | UnsetType = UNSET
    write_scopes: Annotated[list[str], Meta(description="Replacement scopes (edit)")] | UnsetType = UNSET
    owner: Annotated[str, Meta(description="New owner target (reassign); omit to unassign")] | UnsetType = UNSET


# ---------------------------------------------------------------- results


class MemberRow(_Result, frozen=True, kw_only=True):
    """One roster row as the model sees it: ``target`` is the member name, never a session id.

    ``pending`` (present only when non-zero) counts Team messages queued for the
    member and not yet delivered, so a sender can see its message is on its way;
    ``unread`` (likewise) counts delivered messages no completed model step of the
    member has seen yet (zero: everything delivered was read). ``tokens`` (when
    non-zero) sums the input and output tokens of the member's model calls so far;
    ``over_budget`` (present only when true) says a spending limit refuses its
    next model call (``TEAM_BUDGET_EXCEEDED``) until the limit is raised.
    """

    target: str
    role: Literal["lead", "teammate"]
    status: Literal["running", "inactive", "provisioning", "failed", "shut down"]
    description: str | UnsetType = UNSET
    provider: str | UnsetType = UNSET
    context: Literal["fresh", "fork"] | UnsetType = UNSET
    model: str | UnsetType = UNSET
    diagnostics: list[str]
    pending: int | UnsetType = UNSET
    unread: int | UnsetType = UNSET
    tokens: int | UnsetType = UNSET
    over_budget: bool | UnsetType = UNSET


class MemberListResult(_Result, frozen=True):
    """``list_agents``: the rows, and the Team log ``position`` they reflect (a ``wait_agent`` ``since``)."""

    members: list[MemberRow]
    position: int


class SpawnTeammateResult(_Result, frozen=True):
    member: MemberRow


class SendMessageResult(_Result, frozen=True):
    """``queued`` is as durable as ``accepted``: the message must not be resent.

    ``position`` is the Team log position of the queued message; a later
    ``wait_agent`` delta lists the message under ``sent`` when its status moves.
    """

    message_id: str
    status: Literal["accepted", "queued"]
    position: int | UnsetType = UNSET


class StalledTaskRow(_Result, frozen=True):
    """An in-progress task of a quiet Team and its owner's name."""

    task: str
    owner: str


class StalledWork(_Result, frozen=True):
    """What a quiet Team leaves undone: in-progress tasks, ready unclaimed task ids, failed member names."""

    in_progress: list[StalledTaskRow]
    ready: list[str]
    failed: list[str]


class WaitAgentResult(_Result, frozen=True):
    """``position`` is the Team log position the wait observed.

    ``changes`` (present when a change ended the wait) is what changed after
    ``since`` or after the position the wait started from: members, tasks, mail
    counts and the caller's sent messages, each row the current value;
    ``truncated`` names a part too long to list (re-list it). ``reason``
    ``quiescent`` (with ``stalled`` and ``message``): nobody runs and nothing
    changes until a member acts.
    """

    timed_out: bool
    position: int | UnsetType = UNSET
    changes: TeamDelta | UnsetType = UNSET
    reason: Literal["quiescent"] | UnsetType = UNSET
    stalled: StalledWork | UnsetType = UNSET
    message: str | UnsetType = UNSET


class InterruptAgentResult(_Result, frozen=True):
    previous_status: Literal["running", "inactive"]


class TaskRow(_Result, frozen=True, kw_only=True):
    """A task as the model sees it: owner by name (``owner_name``), never by session id.

    ``position`` (a single task's result only) is the Team log position it reflects.
    """

    id: str
    revision: int
    subject: str
    description: str
    status: TaskStatus
    owner_name: str | UnsetType = UNSET
    blocked_by: list[str]
    write_scopes: list[str]
    ready: bool
    write_scope_warnings: list[str]
    position: int | UnsetType = UNSET
    checks: list[str] | UnsetType = UNSET


class TaskListResult(_Result, frozen=True):
    """``next_cursor`` is present only when more rows remain; ``position`` is the Team log position listed."""

    tasks: list[TaskRow]
    next_cursor: int | UnsetType = UNSET
    position: int | UnsetType = UNSET
