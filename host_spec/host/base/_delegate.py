"""Shared body of the legacy delegation tools ``subagent`` and ``subagent_fork``.

Both tools hand a task to a continuable child through ``host.continuations``,
wait for the child's answer, and return it: one-shot delegation from the model's
point of view. The child is still continuable -- it settles to disk when done and
``send_message`` can wake it later -- which is why it goes through the
continuation manager rather than a throwaway agent. The tools differ only in the
provider (``spawn`` = fresh context, ``fork`` = the parent's completed-turn
prefix) and the tool name, so one module builds both. A host without continuable
children (``host.continuations is None``) gets no tool: offering a tool that can
only fail would mislead the model.
"""

from __future__ import annotations

from typing import Annotated, Any

import attrs
import msgspec
import structlog

from host_spec.config import structure_config
from host_spec.errors import DshError, SubagentError
from host_spec.messages import text_block
from host_spec.records import ToolCall, ToolSpec

from host_spec.host.children.activation import epoch_outcome
from host_spec.host.agents.loop import race

__all__ = ["DelegateConfig", "DelegateArgs", "DelegateResult", "install"]

log = structlog.get_logger(__name__)


@attrs.frozen
class DelegateConfig:
    """Config table of ``subagent`` / ``subagent-fork``.

    Attributes:
        provider: Continuable provider that prepares the child (``spawn`` or ``fork``).
        tool_name: Name the model sees.
        max_depth: Deepest delegation level a caller may start a child from.
    """

    provider: str
    tool_name: str
    max_depth: int = attrs.field(default=3, validator=attrs.validators.ge(1))


class DelegateArgs(msgspec.Struct, forbid_unknown_fields=True):
    """Hand a task to a subagent and wait for its final answer. The subagent keeps its
    context afterwards: message it with send_message (by id or description)."""

    description: Annotated[str, msgspec.Meta(min_length=1, description="A 3-5 word label for the subagent.")]
    prompt: Annotated[str, msgspec.Meta(min_length=1, description="The task, complete and self-contained.")]


class DelegateResult(msgspec.Struct):
    """``status`` is the child's stop reason (``completed``, ``aborted``, ``error`` ...)."""

    subagent_id: str
    status: str
    output: str


def _spec(host: Any, config: DelegateConfig) -> ToolSpec:
    async def execute(args: DelegateArgs, call: ToolCall) -> DelegateResult:
        parent = call.agent
        if parent is None:
            raise SubagentError(f"{config.tool_name} needs a calling agent", code="PARENT_UNAVAILABLE")
        depth = parent.session.header.delegation_depth
        if depth >= config.max_depth:
            raise SubagentError(f"delegation depth {depth} reached the limit ({config.max_depth})", code="MAX_DEPTH")
        continuations = host.continuations
        child_id, _ = await continuations.start_continuable(
            child_id=continuations.new_child_id(),
            provider=config.provider,
            label=args.description,
            prompt=[text_block(args.prompt)],
            parent=parent,
            signal=call.signal,
            notify=False,  # the answer comes back as this tool's result, not as a notice
        )
        # Resident here: the child's lock was held until acceptance, so it cannot have settled yet.
        session = host.agents.get(child_id).session
        finished, _ = await race(continuations.settle(child_id), call.signal)
        if not finished:
            try:
                continuations.interrupt(child_id, parent)
            except DshError as exc:  # the parent itself is going away; its drain stops the child
                log.info("delegate.interrupt_skipped", child=child_id, error=str(exc))
            raise SubagentError(f"subagent {child_id} was cancelled with its caller", code="CANCELLED")
        outcome = epoch_outcome(session.events, session.header.seed_length)
        return DelegateResult(subagent_id=child_id, status=outcome.stop_reason, output=outcome.closing or "")

    return ToolSpec(
        name=config.tool_name,
        description=DelegateArgs.__doc__ or "",
        args_type=DelegateArgs,
        result_type=DelegateResult,
        execute=execute,
        concurrency_safe=True,
    )


def install(host: Any, ctx: Any, defaults: dict[str, Any]) -> DelegateConfig:
    """Validate the config (``defaults`` under the user's table) and register the tool."""
    config = structure_config(DelegateConfig, {**defaults, **ctx.config}, f"plugins.{ctx.name}")
    if host.continuations is None:
        log.info("delegate.inactive", plugin=ctx.name, reason="host has no continuations")
        return config
    ctx.own(host.tools.register(_spec(host, config)))
    return config
