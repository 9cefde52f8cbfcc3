"""The model-facing Team surface: tool names, descriptions and types, in one table.

Kept apart from the adapters so the surface can be measured and pinned (golden
file, budget M1) without a Team service. Every byte here is sent to the model on
every step, so each description says what the tool does and what it returns,
nothing more.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from host_spec.schema import compact_json, tool_json_schema

from dsh_team_tools import schemas as s
from dsh_team_tools.policy import POLICY_TEXT

__all__ = ["ToolEntry", "CATALOG", "TOOL_NAMES", "SURFACE_BUDGET", "model_tools", "surface_size"]

#: Budget M1: bytes of the nine compact tool schemas plus the policy section.
SURFACE_BUDGET: Final = 6500


@attrs.frozen
class ToolEntry:
    """One tool's static description (its behaviour is bound in :mod:`.tools`)."""

    name: str
    description: str
    args_type: type
    result_type: Any
    concurrency_safe: bool = False


CATALOG: Final[tuple[ToolEntry, ...]] = (
    ToolEntry(
        "spawn_teammate",
        "Lead only: create a teammate and give it a first task. Returns its member row.",
        s.SpawnTeammateArgs,
        s.SpawnTeammateResult,
    ),
    ToolEntry(
        "send_message",
        "Send a text message to a Team member. A returned message_id means it is durable, even if queued: never resend.",
        s.SendMessageArgs,
        s.SendMessageResult,
    ),
    ToolEntry(
        "list_agents",
        "List Team members, Lead first, with their targets and status.",
        s.ListAgentsArgs,
        s.MemberListResult,
        concurrency_safe=True,
    ),
    ToolEntry(
        "wait_agent",
        "Wait for the next Team change (message, task, member) or the timeout. "
        "Returns reason quiescent with the stalled work when nobody can change anything.",
        s.WaitAgentArgs,
        s.WaitAgentResult,
    ),
    ToolEntry(
        "interrupt_agent",
        "Lead only: stop a teammate's current turn; its pending messages are kept.",
        s.InterruptAgentArgs,
        s.InterruptAgentResult,
    ),
    ToolEntry(
        "team_task_create",
        "Add a pending, unowned task to the Team board.",
        s.TeamTaskCreateArgs,
        s.TaskRow,
    ),
    ToolEntry(
        "team_task_list",
        "List non-deleted tasks in board order, filtered and paged.",
        s.TeamTaskListArgs,
        s.TaskListResult,
        concurrency_safe=True,
    ),
    ToolEntry(
        "team_task_get",
        "Read one task, deleted ones included.",
        s.TeamTaskGetArgs,
        s.TaskRow,
        concurrency_safe=True,
    ),
    ToolEntry(
        "team_task_update",
        "Change a task if expected_revision is current. reassign is Lead only.",
        s.TeamTaskUpdateArgs,
        s.TaskRow,
    ),
)

TOOL_NAMES: Final = tuple(entry.name for entry in CATALOG)


def model_tools() -> list[dict[str, Any]]:
    """The nine tools exactly as a model receives them: ``{name, description, parameters}``."""
    return [
        {"name": entry.name, "description": entry.description, "parameters": tool_json_schema(entry.args_type)}
        for entry in CATALOG
    ]


def surface_size() -> int:
    """Budget M1: UTF-8 bytes of the compact tool list plus the policy section text."""
    return len(compact_json(model_tools()).encode()) + len(POLICY_TEXT.encode())
