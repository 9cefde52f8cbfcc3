"""Legacy plugin ``subagent-control``: ``send_message``, ``interrupt_agent`` and ``list_agents``.

They act on the caller's continuable children through ``host.continuations``; a
child is addressed by its id or by its description (label) when that is unique.
Team members get same-named scoped tools that shadow these, which is why Team
profiles disable this plugin. No tools on a host without continuations.
"""

from __future__ import annotations

from typing import Annotated, Any

import attrs
import msgspec
import structlog

from host_spec import hookimpl
from host_spec.config import structure_config
from host_spec.errors import SubagentError
from host_spec.messages import text_block
from host_spec.records import ToolCall, ToolSpec

log = structlog.get_logger(__name__)

_AGENT_ID = msgspec.Meta(min_length=1, description="The subagent's id, or its description when unique.")


@attrs.frozen
class ControlConfig:
    """``subagent-control`` takes no settings; any key is a typo."""


class ChildSendArgs(msgspec.Struct, forbid_unknown_fields=True):
    """Queue a message as the next turn of one of your subagents (it wakes from disk if needed).
    When it finishes you get a notice with its closing message."""

    agent_id: Annotated[str, _AGENT_ID]
    message: Annotated[str, msgspec.Meta(min_length=1)]


class ChildSendResult(msgspec.Struct):
    agent_id: str
    message_id: str


class ChildInterruptArgs(msgspec.Struct, forbid_unknown_fields=True):
    """Cancel the current turn of one of your subagents (its queued messages stay)."""

    agent_id: Annotated[str, _AGENT_ID]


class ChildInterruptResult(msgspec.Struct):
    accepted: bool


class ChildListArgs(msgspec.Struct, forbid_unknown_fields=True):
    """List your continuable subagents: id, description, provider and status."""


class ChildRow(msgspec.Struct):
    """``status``: ``running`` / ``idle`` (loaded) or ``ready`` (asleep on disk)."""

    agent_id: str
    description: str
    provider: str
    status: str


class ListAgentsResult(msgspec.Struct):
    agents: list[ChildRow]


def _caller(call: ToolCall) -> Any:
    if call.agent is None:
        raise SubagentError(f"{call.name} needs a calling agent", code="PARENT_UNAVAILABLE")
    return call.agent


def _specs(host: Any) -> list[ToolSpec]:
    continuations = host.continuations

    async def send_message(args: ChildSendArgs, call: ToolCall) -> ChildSendResult:
        parent = _caller(call)
        child_id = await continuations.directory.resolve(parent.id, args.agent_id)
        source = {"kind": "coordinator", "form": "relay", "sender_session_id": parent.id}
        message_id = await continuations.deliver(
            parent, child_id, [text_block(args.message)], source=source, mode="followup", signal=call.signal
        )
        return ChildSendResult(agent_id=child_id, message_id=message_id)

    async def interrupt_agent(args: ChildInterruptArgs, call: ToolCall) -> ChildInterruptResult:
        parent = _caller(call)
        continuations.interrupt(await continuations.directory.resolve(parent.id, args.agent_id), parent)
        return ChildInterruptResult(accepted=True)

    async def list_agents(args: ChildListArgs, call: ToolCall) -> ListAgentsResult:
        parent = _caller(call)
        rows = []
        for info in await continuations.directory.list(parent.id):
            agent = host.agents.get(info.child_id) if continuations.is_resident(info.child_id) else None
            status = agent.status if agent is not None else "ready"
            rows.append(ChildRow(info.child_id, info.label, info.provider, status))
        return ListAgentsResult(agents=rows)

    return [
        ToolSpec("send_message", ChildSendArgs.__doc__ or "", ChildSendArgs, ChildSendResult, send_message),
        ToolSpec("interrupt_agent", ChildInterruptArgs.__doc__ or "", ChildInterruptArgs, ChildInterruptResult, interrupt_agent),
        ToolSpec("list_agents", ChildListArgs.__doc__ or "", ChildListArgs, ListAgentsResult, list_agents),
    ]


@hookimpl
def dsh_plugin_loaded(host: Any, ctx: Any) -> None:
    structure_config(ControlConfig, ctx.config, f"plugins.{ctx.name}")
    if host.continuations is None:
        log.info("control.inactive", plugin=ctx.name, reason="host has no continuations")
        return
    for spec in _specs(host):
        ctx.own(host.tools.register(spec))
