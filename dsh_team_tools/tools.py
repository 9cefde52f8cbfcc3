"""The nine Team tools: thin adapters from model calls to the Team service.

Each adapter takes the exact live calling agent from ``call.agent`` (the only
credential the service accepts), forwards only the arguments the model sent, and
maps service views to the model rows of :mod:`.schemas` (member and owner by
*name*, never a session id). Roles and every domain rule are enforced by the
service; the adapters add only what the tool surface itself owns: the identity
reminder, provider choice, names instead of ids in a quiet Team's stalled work,
and task-list filtering and paging.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from msgspec import UNSET

from host_spec.errors import ToolError
from host_spec.messages import text_block
from host_spec.records import ToolCall, ToolSpec

from dsh_team import check_since
from dsh_team.core import check_content

from dsh_team_tools import schemas as s
from dsh_team_tools.catalog import CATALOG
from dsh_team_tools.choices import closed_sets
from dsh_team_tools.reminder import reminder_block

if TYPE_CHECKING:
    from host_spec.protocols import Agent

    from dsh_team import MemberCost, MemberView, TaskView, TeamServiceAPI, TeamStalled

    from dsh_team_tools.config import ToolsConfig

__all__ = ["QUIESCENT_MESSAGE", "build_tools", "member_row", "task_row", "stalled_rows"]

QUIESCENT_MESSAGE: Final = (
    "Nobody in the Team is running and no mail is open, so nothing changes until a member acts. "
    "Wake an inactive owner with send_message, claim or reassign a ready task, or finish."
)
_TEXT_TOOLS: Final = frozenset({"send_message", "spawn_teammate"})
_TASK_TOOLS: Final = frozenset({"team_task_create", "team_task_update"})
#: Task tools: a 16384-character description as escaped JSON, with room for the rest.
_TASK_ARGUMENT_BYTES: Final = 131_072
_SMALL_ARGUMENT_BYTES: Final = 16_384
_UNOWNED: Final = "unowned"

Execute = Callable[[Any, ToolCall], Awaitable[Any]]


def _opt(value: Any) -> Any:
    """``None`` (absent in a service view) becomes ``UNSET`` (absent in the model row)."""
    return UNSET if value is None else value


def member_row(view: MemberView, cost: MemberCost | None = None) -> s.MemberRow:
    """A service ``MemberView`` as the model's roster row (``target`` = member name), with its spend."""
    return s.MemberRow(
        target=view.name,
        role=view.role,
        status=view.status,
        description=_opt(getattr(view, "description", None)),
        provider=_opt(getattr(view, "provider", None)),
        context=_opt(getattr(view, "context", None)),
        model=_opt(getattr(view, "model", None)),
        diagnostics=list(view.diagnostics),
        pending=getattr(view, "pending", 0) or UNSET,
        unread=getattr(view, "unread", 0) or UNSET,
        tokens=(cost.spend.tokens or UNSET) if cost is not None else UNSET,
        over_budget=True if cost is not None and cost.exceeded else UNSET,
    )


def task_row(view: TaskView, position: int | None = None) -> s.TaskRow:
    """A service ``TaskView`` as the model's task row (owner by name; ``owner_id`` dropped).

    ``position`` defaults to the view's own (set on a mutation's result); a listed row has none.
    """
    if position is None:
        position = getattr(view, "position", None)
    return s.TaskRow(
        id=view.id,
        revision=view.revision,
        subject=view.subject,
        description=view.description,
        status=view.status,
        owner_name=_opt(getattr(view, "owner_name", None)),
        blocked_by=list(view.blocked_by),
        write_scopes=list(view.write_scopes),
        ready=view.ready,
        write_scope_warnings=list(view.write_scope_warnings),
        position=_opt(position),
        checks=list(view.checks) if getattr(view, "checks", ()) else UNSET,
    )


def stalled_rows(stalled: TeamStalled, names: Mapping[str, str]) -> s.StalledWork:
    """A quiet Team's stalled work as the model reads it: member names, never session ids."""
    return s.StalledWork(
        in_progress=[s.StalledTaskRow(task=row.id, owner=names.get(row.owner_id, row.owner_id)) for row in stalled.in_progress],
        ready=list(stalled.ready),
        failed=[names.get(member_id, member_id) for member_id in stalled.failed],
    )


def _caller(call: ToolCall) -> Agent:
    """The calling agent; a call without one behaves as if the scoped tool did not exist."""
    if call.agent is None:
        raise ToolError(f'unknown tool "{call.name}"', code="UNKNOWN_TOOL")
    return call.agent


def _sent(args: Any, *names: str) -> dict[str, Any]:
    """The optional fields the model actually sent (UNSET ones are not forwarded)."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not UNSET}


def _page(rows: Sequence[Any], args: s.TeamTaskListArgs, position: int) -> s.TaskListResult:
    """Filter, validate the cursor window, and slice one page of task rows."""
    if args.status is not UNSET:
        rows = [row for row in rows if row.status == args.status]
    if args.owner is not UNSET:
        wanted = None if args.owner == _UNOWNED else args.owner
        rows = [row for row in rows if getattr(row, "owner_name", None) == wanted]
    if args.ready is not UNSET:
        rows = [row for row in rows if row.ready is args.ready]
    if not 0 <= args.cursor <= s.MAX_SAFE_INTEGER:
        raise ToolError("cursor must be a non-negative safe integer", code="INVALID_ARGS")
    if not 1 <= args.limit <= s.LIST_MAX_LIMIT:
        raise ToolError(f"limit must be an integer from 1 through {s.LIST_MAX_LIMIT}", code="INVALID_ARGS")
    end = args.cursor + args.limit
    page = [task_row(row) for row in rows[args.cursor : end]]
    return s.TaskListResult(tasks=page, next_cursor=end if end < len(rows) else UNSET, position=position)


def _adapters(team: Callable[[], TeamServiceAPI], config: ToolsConfig) -> dict[str, Execute]:
    """One ``execute`` per tool name, closed over the service lookup and config."""

    async def spawn_teammate(args: s.SpawnTeammateArgs, call: ToolCall) -> s.SpawnTeammateResult:
        check_content([text_block(args.prompt)], "prompt")  # the reminder block must not hide a blank prompt
        member = await team().spawn_teammate(
            _caller(call),
            name=args.name,
            description=args.description,
            prompt=[reminder_block(args.name), text_block(args.prompt)],
            context=args.context,
            provider=config.provider_for(args.context),
            signal=call.signal,
            **_sent(args, "plan_approval"),
            **_sent(args, "role"),
        )
        return s.SpawnTeammateResult(member=member_row(member))

    async def send_message(args: s.SendMessageArgs, call: ToolCall) -> s.SendMessageResult:
        if args.permission is not UNSET or args.answer is not UNSET:
            if args.permission is UNSET or args.answer is UNSET:
                raise ToolError("answer a permission request with both permission and answer", code="INVALID_ARGS")
            ask = await team().answer_permission(
                _caller(call), ask_id=args.permission, answer=args.answer, reason=args.message
            )
            return s.SendMessageResult(message_id=ask.request.ask_id, status="accepted")
        if args.plan is not UNSET:
            result = await team().plan_step(
                _caller(call), plan=args.plan, target=args.target, text=args.message, signal=call.signal
            )
        elif args.shutdown == "request":
            result = await team().request_shutdown(_caller(call), args.target, args.message)
        elif args.shutdown is not UNSET:  # the answer always goes to the Lead
            result = await team().answer_shutdown(_caller(call), args.shutdown == "approve", args.message)
        else:
            result = await team().send_message(
                _caller(call), target=args.target, content=[text_block(args.message)], signal=call.signal
            )
        return s.SendMessageResult(
            message_id=result.message_id, status=result.status, position=_opt(getattr(result, "position", None))
        )

    async def list_agents(args: s.ListAgentsArgs, call: ToolCall) -> s.MemberListResult:
        caller, service = _caller(call), team()
        costs = service.member_costs(caller)
        rows = [member_row(view, costs.get(view.id)) for view in service.list_members(caller)]
        return s.MemberListResult(members=rows, position=service.position(caller))  # same synchronous span

    async def wait_agent(args: s.WaitAgentArgs, call: ToolCall) -> s.WaitAgentResult:
        caller = _caller(call)
        service = team()  # one service for the wait and the names of its stalled work
        check_since(None if args.since is UNSET else args.since)
        # An out-of-range timeout goes to the service: its TEAM_INVALID_TIMEOUT is the answer.
        result = await service.wait_for_change(caller, args.timeout_ms, signal=call.signal, **_sent(args, "since"))
        position = _opt(getattr(result, "position", None))
        changes = _opt(getattr(result, "delta", None))
        stalled = getattr(result, "stalled", None)
        if getattr(result, "reason", None) != "quiescent" or stalled is None:
            return s.WaitAgentResult(timed_out=result.timed_out, position=position, changes=changes)
        names = {view.id: view.name for view in service.list_members(caller)}
        return s.WaitAgentResult(
            timed_out=False,
            position=position,
            changes=changes,
            reason="quiescent",
            stalled=stalled_rows(stalled, names),
            message=QUIESCENT_MESSAGE,
        )

    async def interrupt_agent(args: s.InterruptAgentArgs, call: ToolCall) -> s.InterruptAgentResult:
        result = team().interrupt(_caller(call), args.target)
        return s.InterruptAgentResult(previous_status=result.previous_status)

    async def team_task_create(args: s.TeamTaskCreateArgs, call: ToolCall) -> s.TaskRow:
        view = await team().create_task(
            _caller(call),
            subject=args.subject,
            description=args.description,
            **_sent(args, "blocked_by", "write_scopes", "checks"),
        )
        return task_row(view)

    async def team_task_list(args: s.TeamTaskListArgs, call: ToolCall) -> s.TaskListResult:
        caller, service = _caller(call), team()
        return _page(service.list_tasks(caller), args, service.position(caller))

    async def team_task_get(args: s.TeamTaskGetArgs, call: ToolCall) -> s.TaskRow:
        caller, service = _caller(call), team()
        return task_row(service.get_task(caller, args.task_id), service.position(caller))

    async def team_task_update(args: s.TeamTaskUpdateArgs, call: ToolCall) -> s.TaskRow:
        view = await team().update_task(
            _caller(call),
            task_id=args.task_id,
            expected_revision=args.expected_revision,
            action=args.action,
            **_sent(args, "subject", "description", "blocked_by", "write_scopes", "owner"),
            signal=call.signal,
        )
        return task_row(view)

    return {
        "spawn_teammate": spawn_teammate,
        "send_message": send_message,
        "list_agents": list_agents,
        "wait_agent": wait_agent,
        "interrupt_agent": interrupt_agent,
        "team_task_create": team_task_create,
        "team_task_list": team_task_list,
        "team_task_get": team_task_get,
        "team_task_update": team_task_update,
    }


def build_tools(
    team: Callable[[], TeamServiceAPI], config: ToolsConfig, *, available: Callable[[Agent], bool] | None = None
) -> list[ToolSpec]:
    """The nine Team ``ToolSpec``s, in catalogue order.

    Args:
        team: Returns the Team service at the moment of each call (the plugin looks it
            up by type, so a reloaded service is the one called).
        config: Provider names for ``spawn_teammate``.
        available: Optional per-step availability predicate (e.g. Team mode) shared by all nine.
    """
    adapters = _adapters(team, config)
    choices = closed_sets(team)
    service = team()  # the limits in force when the tools are built
    return [
        ToolSpec(
            name=entry.name,
            description=entry.description,
            args_type=entry.args_type,
            result_type=entry.result_type,
            execute=adapters[entry.name],
            available=available,
            concurrency_safe=entry.concurrency_safe,
            max_argument_bytes=_argument_bound(service, entry.name),
            choices=choices.get(entry.name),
        )
        for entry in CATALOG
    ]


def _argument_bound(service: TeamServiceAPI, name: str) -> int:
    """The largest raw arguments a call of ``name`` may carry before the host refuses to store them.

    A message or first prompt larger than the Team's framed-message bound would be
    refused by the service anyway, so the host refuses it first and keeps only a
    preview; task text is bounded by the task fields; the rest take short ids.
    """
    if name in _TEXT_TOOLS:
        config = getattr(service, "config", None)
        return int(getattr(config, "max_message_bytes", _TASK_ARGUMENT_BYTES))
    return _TASK_ARGUMENT_BYTES if name in _TASK_TOOLS else _SMALL_ARGUMENT_BYTES
