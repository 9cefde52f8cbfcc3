"""The closed sets of the Team tools' arguments at one step: who can be named, which tasks exist.

A host adapter that constrains the model's reply to a JSON schema narrows these
fields to an ``enum`` (``ToolSpec.choices``), so a small model can only name a member
that is there, a task that exists, an action it may take. The sets are read from
the Team as the caller sees it when the step is prepared. They are hints: the
service still decides every call (a member may fail or a task be deleted before the
call runs), and any refusal the Team raises while they are read leaves the fields
open (a step is never failed by its hints).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple, get_args

from host_spec.errors import DshError

from dsh_team_tools.schemas import TaskAction

if TYPE_CHECKING:
    from host_spec.protocols import Agent

    from dsh_team import TeamServiceAPI

__all__ = ["Choices", "closed_sets"]

Choices = Callable[["Agent"], Mapping[str, Sequence[str]]]

#: A member that can be addressed: not one whose creation is pending or failed.
_UNADDRESSABLE: Final = frozenset({"provisioning", "failed"})
_UNOWNED: Final = "unowned"
_ACTIONS: Final[tuple[str, ...]] = get_args(TaskAction)
_LEAD_ONLY_ACTIONS: Final = frozenset({"reassign"})


class _Team(NamedTuple):
    """The caller's view of its Team at this step."""

    own: str
    lead: bool
    names: list[str]  # every addressable member, the Lead first
    teammates: list[str]
    tasks: list[str]  # non-deleted task ids, board order


def closed_sets(team: Callable[[], TeamServiceAPI]) -> dict[str, Choices]:
    """Per Team tool name, ``(agent) -> {field: values}`` for the fields with a closed set.

    Args:
        team: Returns the Team service in force (looked up at each step).
    """

    def read(agent: Agent) -> _Team | None:
        service = team()
        try:
            membership = service.membership(agent)
            members = [m for m in service.list_members(agent) if m.status not in _UNADDRESSABLE]
            tasks = [t.id for t in service.list_tasks(agent)]
        except DshError:
            return None
        names = [m.name for m in members]
        teammates = [m.name for m in members if m.role == "teammate"]
        return _Team(membership.name, membership.is_lead, names, teammates, tasks)

    def controls(agent: Agent) -> Mapping[str, Sequence[str]]:
        try:
            return team().control_choices(agent)
        except DshError:
            return {}

    def spawn_teammate(agent: Agent) -> Mapping[str, Sequence[str]]:
        sets = controls(agent)
        return {"role": sets["role"]} if "role" in sets else {}

    def send_message(agent: Agent) -> Mapping[str, Sequence[str]]:
        state = read(agent)
        if state is None:
            return {}
        sets = controls(agent)
        return {"target": [name for name in state.names if name != state.own],
                "plan": sets.get("plan", ()), "shutdown": sets.get("shutdown", ())}

    def interrupt_agent(agent: Agent) -> Mapping[str, Sequence[str]]:
        state = read(agent)
        return {} if state is None else {"target": state.teammates}

    def task_get(agent: Agent) -> Mapping[str, Sequence[str]]:
        state = read(agent)
        return {} if state is None else {"task_id": state.tasks}

    def task_create(agent: Agent) -> Mapping[str, Sequence[str]]:
        state = read(agent)
        return {} if state is None else {"blocked_by": state.tasks}

    def task_list(agent: Agent) -> Mapping[str, Sequence[str]]:
        state = read(agent)
        return {} if state is None else {"owner": [*state.names, _UNOWNED]}

    def task_update(agent: Agent) -> Mapping[str, Sequence[str]]:
        state = read(agent)
        if state is None:
            return {}
        actions = [a for a in _ACTIONS if state.lead or a not in _LEAD_ONLY_ACTIONS]
        return {"task_id": state.tasks, "blocked_by": state.tasks, "owner": state.names, "action": actions}

    return {
        "spawn_teammate": spawn_teammate,
        "send_message": send_message,
        "interrupt_agent": interrupt_agent,
        "team_task_get": task_get,
        "team_task_create": task_create,
        "team_task_list": task_list,
        "team_task_update": task_update,
    }
