"""Executing one step's tool calls: scheduling, checkpoints and model-ordered results.

Consecutive calls of tools marked ``concurrency_safe`` run together; any other
call runs alone (a barrier). For each batch the ``tool/call`` records are
appended, the session is flushed (so a crash mid-body is reported as
``TOOL_OUTCOME_UNKNOWN``, not silently re-run), the bodies run, and the
``tool/result`` events are appended in model order. Once the turn is cancelled,
calls that have not started get a synthetic ``tool/call`` + ``tool/result`` with
``ABORTED_BEFORE_DISPATCH``; started calls drain (they see ``call.signal``).

A call whose raw arguments exceed its tool's ``max_argument_bytes`` (or the
host's default bound) is refused before anything is stored: the assistant
message and the ``tool/call`` record hold only a short preview with the size
(:func:`bound_calls`), and the result is ``ARGUMENTS_TOO_LARGE``. A rejected
oversized payload is therefore never written to the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from host_spec.events import EventType, ToolCallRecord, json_encode
from host_spec.messages import ToolResultMessage
from host_spec.records import AbortSignal

from host_spec.host.models.adapter import ModelToolCall
from host_spec.host.agents.tools import error_result

if TYPE_CHECKING:
    from host_spec.host.agents.driven import DrivenAgent
    from host_spec.host.agents.repair import HeldCall

__all__ = ["run_tool_calls", "run_held_calls", "batches", "bound_calls", "ABORTED_BEFORE_DISPATCH_TEXT", "DEFAULT_MAX_ARGUMENT_BYTES"]

ABORTED_BEFORE_DISPATCH_TEXT: Final = "tool call aborted before dispatch"
#: Bound on a call's raw arguments for tools that declare none.
DEFAULT_MAX_ARGUMENT_BYTES: Final = 1 << 20
#: Characters of an oversized call's arguments kept as its preview.
PREVIEW_CHARS: Final = 200


def bound_calls(agent: DrivenAgent, calls: Sequence[ModelToolCall]) -> tuple[list[ModelToolCall], dict[str, tuple[int, int]]]:
    """``calls`` with every oversized call's arguments replaced by a preview, and ``{call id: (size, limit)}``.

    The preview is JSON (``{"truncated": <first characters>, "bytes": <size>}``) so
    the stored conversation stays well formed and says how much was refused.
    """
    bounded: list[ModelToolCall] = []
    oversized: dict[str, tuple[int, int]] = {}
    tools = agent.runtime.tools
    for call in calls:
        spec = tools.get(agent, call.name)
        declared = spec.max_argument_bytes if spec is not None else None
        limit = DEFAULT_MAX_ARGUMENT_BYTES if declared is None else declared
        size = len(call.arguments.encode())
        if size > limit:
            preview = json_encode({"truncated": call.arguments[:PREVIEW_CHARS], "bytes": size}).decode()
            call = ModelToolCall(id=call.id, name=call.name, arguments=preview)
            oversized[call.id] = (size, limit)
        bounded.append(call)
    return bounded, oversized


def batches(agent: DrivenAgent, calls: Sequence[ModelToolCall]) -> list[list[ModelToolCall]]:
    """Group consecutive concurrency-safe calls; every other call is a batch of one."""
    groups: list[list[ModelToolCall]] = []
    tools = agent.runtime.tools
    safe_run = False
    for call in calls:
        spec = tools.get(agent, call.name)
        safe = spec is not None and spec.concurrency_safe
        if safe and safe_run:
            groups[-1].append(call)
        else:
            groups.append([call])
        safe_run = safe
    return groups


async def run_tool_calls(
    agent: DrivenAgent,
    calls: Sequence[ModelToolCall],
    *,
    turn: int,
    step: int,
    signal: AbortSignal,
    oversized: dict[str, tuple[int, int]] | None = None,
) -> None:
    """Run ``calls`` and append their records and results (see the module docstring).

    If recording or the checkpoint fails, every call of the step still gets a
    result (``TOOL_NOT_STARTED``) before the error propagates, so the model never
    sees a tool call without one.
    """
    session = agent.session
    answered: set[str] = set()
    started: set[str] = set()
    refused = oversized or {}

    async def execute(call: ModelToolCall) -> ToolResultMessage:
        if call.id in refused:
            size, limit = refused[call.id]
            text = f'arguments of "{call.name}" are {size} bytes; the limit is {limit}: send less'
            return error_result(call.id, call.name, "ARGUMENTS_TOO_LARGE", text, turn=turn, step=step)
        return await agent.runtime.tools.execute(agent, call.id, call.name, call.arguments, signal, turn=turn, step=step)

    def record(call: ModelToolCall) -> None:
        record_ = ToolCallRecord(turn=turn, step=step, call_id=call.id, name=call.name, arguments=call.arguments)
        session.append(EventType.TOOL_CALL, record_)

    def result(message: ToolResultMessage) -> None:
        session.append(EventType.TOOL_RESULT, message)
        answered.add(message.call_id)

    try:
        for batch in batches(agent, calls):
            if signal.aborted:
                for call in batch:
                    record(call)
                    code = "ABORTED_BEFORE_DISPATCH"
                    result(error_result(call.id, call.name, code, ABORTED_BEFORE_DISPATCH_TEXT, turn=turn, step=step))
                continue
            for call in batch:
                record(call)
            await session.flush()  # checkpoint: the calls are on record before any body runs
            started.update(c.id for c in batch)
            runs = [execute(c) for c in batch]
            messages = [await runs[0]] if len(runs) == 1 else await asyncio.gather(*runs)
            for message in messages:
                result(message)
    except Exception as exc:
        for call in calls:
            if call.id not in answered:
                code = "TOOL_OUTCOME_UNKNOWN" if call.id in started else "TOOL_NOT_STARTED"
                try:
                    result(error_result(call.id, call.name, code, f"tool call failed: {exc}", turn=turn, step=step))
                except Exception:
                    break  # the session refuses appends; crash repair closes it on resume
        raise


async def run_held_calls(
    agent: DrivenAgent, calls: Sequence[HeldCall], *, turn: int, step: int, signal: AbortSignal
) -> None:
    """Finish the calls a crash left waiting on their permission ask, one by one, in model order.

    Their ``tool/call`` records and ``asked`` marks are on record already; each is
    executed again through the registry, whose permission gate finds the recorded
    ask (never asking twice) and runs the body only once it is allowed. A failure
    to record closes the remaining calls the way :func:`run_tool_calls` does.
    """
    session = agent.session
    answered: set[str] = set()
    try:
        await session.flush()  # checkpoint: the closers and what woke the agent are durable before it waits
        for call in calls:
            if signal.aborted:
                break
            message = await agent.runtime.tools.execute(
                agent, call.call_id, call.name, call.arguments, signal, turn=turn, step=step
            )
            session.append(EventType.TOOL_RESULT, message)
            answered.add(call.call_id)
    finally:
        for call in calls:
            if call.call_id not in answered:
                code, text = "ABORTED_BEFORE_DISPATCH", ABORTED_BEFORE_DISPATCH_TEXT
                try:
                    session.append(EventType.TOOL_RESULT, error_result(call.call_id, call.name, code, text, turn=turn, step=step))
                except Exception:
                    break  # the session refuses appends; crash repair closes it on resume
