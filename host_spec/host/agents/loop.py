"""The turn driver: turns of steps, each step one model call and its tool calls.

One driver task runs per active agent (started by :meth:`Agent.wake`)::

    while there is pending work (and the activity is not cancelled):
        refused (dsh_agent_pre_step)? stop, nothing claimed
        turn/start; claim next-step items + the first next-turn prompt
        loop steps (each one after the first admitted again, else turn/end {error}):
            step/start; user/message per claimed item; checkpoint (flush)
            context near the model's window? summary call -> context/compacted (flush)
            model call -> assistant/message; tool calls -> tool/call, tool/result
            step/end (always)
            stop when the model called no tools and nothing was steered in meanwhile;
            otherwise claim the next-step items and go on
        turn/end {reason} (always)

A turn a crash left open on calls whose permission ask was open (``agent.held``,
see :mod:`.repair`) is continued before anything else: its held calls are asked
again and run once allowed, their results close the step, and the turn goes on
with the next model call.

The checkpoint before each model call and each tool body makes everything the
model or a tool could act on durable first, so a crash never loses an accepted
message and crash repair can tell a started tool call from an unstarted one.
Every loop append carries ``cause.agent_id`` (a context variable set for the task).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from host_spec.errors import DshError
from host_spec.events import Cause, EventType, StepMark, TurnEnd, TurnStart
from host_spec.messages import AssistantMessage, text_block
from host_spec.records import AbortSignal, ToolSpec

from host_spec.host.store.context import current_cause
from host_spec.host.models.adapter import ModelRequest, parse_reply
from host_spec.host.agents.compaction import SUMMARY_SYSTEM, compaction_record, plan_compaction, with_brief
from host_spec.host.agents.tool_step import bound_calls, run_held_calls, run_tool_calls

if TYPE_CHECKING:
    from host_spec.host.agents.driven import DrivenAgent

__all__ = ["drive", "run_turn", "race"]

log = structlog.get_logger(__name__)
T = TypeVar("T")


async def race(awaitable: Awaitable[T], signal: AbortSignal) -> tuple[bool, T | None]:
    """Await ``awaitable`` unless ``signal`` aborts first (then it is cancelled).

    Returns ``(True, result)`` when it finished, ``(False, None)`` when aborted.
    """
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        return False, None
    return True, task.result()


async def drive(agent: DrivenAgent) -> None:
    """Run turns while the agent has pending work; the agent goes idle when this returns."""
    current_cause.set(Cause(agent_id=agent.id))
    try:
        while True:
            if agent.signal.aborted and not agent.take_latch():
                break
            if agent.held is None and not agent.inbox.has_pending():
                break
            if agent.held is None and _refused(agent, agent.turn + 1, 1) is not None:
                break  # nothing claimed, nothing written: the pending items wait
            await run_turn(agent)
    except Exception:
        # Only a failure to record the turn itself lands here (e.g. the session closed).
        log.exception("agent driver failed", agent=agent.id)
    finally:
        agent.driver_done()


def _error_reason(exc: BaseException) -> dict[str, Any]:
    code = exc.code if isinstance(exc, DshError) else "UNKNOWN"
    message = exc.message if isinstance(exc, DshError) else f"{type(exc).__name__}: {exc}"
    return {"kind": "error", "error": {"message": message, "code": code}}


def _refused(agent: DrivenAgent, turn: int, step: int) -> BaseException | None:
    """Ask the plugins whether model call ``step`` of ``turn`` may start; the refusal, if any."""
    try:
        agent.runtime.hooks.admit_step(agent, turn, step)
    except Exception as exc:
        code = exc.code if isinstance(exc, DshError) else "UNKNOWN"
        log.warning("model call refused", agent=agent.id, turn=turn, step=step, code=code, error=str(exc))
        return exc
    return None


def _aborted_reason(agent: DrivenAgent) -> dict[str, Any]:
    cause = agent.cancel_cause
    reason: dict[str, Any] = {"kind": cause.kind if cause is not None else "user"}
    if cause is not None and cause.detail is not None:
        reason["detail"] = cause.detail
    return {"kind": "aborted", "reason": reason}


async def run_turn(agent: DrivenAgent) -> None:
    """One turn, always closed with ``turn/end`` (completed, aborted or error)."""
    session, signal = agent.session, agent.signal
    held, agent.held = agent.held, None
    if held is None:
        agent.turn += 1
        turn, step = agent.turn, 0
        session.append(EventType.TURN_START, TurnStart(turn=turn))
    else:
        turn, step, calls = held
    reason: dict[str, Any] = {"kind": "completed"}
    try:
        if held is not None:
            try:
                await run_held_calls(agent, calls, turn=turn, step=step, signal=signal)
            finally:
                session.append(EventType.STEP_END, StepMark(turn=turn, step=step))
        while held is None or not signal.aborted:
            refusal = _refused(agent, turn, step + 1) if step else None
            if refusal is not None:
                reason = _error_reason(refusal)  # the next step's items stay pending
                break
            claimed = agent.inbox.claim_step()
            if step == 0:
                prompt = agent.inbox.claim_turn()
                if prompt is not None:
                    claimed.append(prompt)
                if not claimed:  # pragma: no cover - drive() only starts turns with pending work
                    break
            step += 1
            session.append(EventType.STEP_START, StepMark(turn=turn, step=step))
            try:
                for message in claimed:
                    session.append(EventType.USER_MESSAGE, message)
                ends = await _run_step(agent, turn, step, signal)
            finally:
                session.append(EventType.STEP_END, StepMark(turn=turn, step=step))
            if signal.aborted or (ends and not agent.inbox.next_step):
                break
    except Exception as exc:
        if not signal.aborted:
            log.warning("turn failed", agent=agent.id, turn=turn, error=str(exc))
            reason = _error_reason(exc)
    if signal.aborted:
        reason = _aborted_reason(agent)
    session.append(EventType.TURN_END, TurnEnd(turn=turn, reason=reason))
    try:
        agent.runtime.hooks.turn_end(agent, turn, reason)
    except Exception:
        log.exception("turn_end hook failed", agent=agent.id, turn=turn)


async def _run_step(agent: DrivenAgent, turn: int, step: int, signal: AbortSignal) -> bool:
    """One model call and its tool calls. Returns whether the turn may end after it."""
    runtime, session = agent.runtime, agent.session
    await session.flush()  # checkpoint: the claimed messages are durable before the model sees them
    if signal.aborted:
        return True
    system, tools = runtime.prompts.render(agent), runtime.tools.visible(agent)
    if not await _compact(agent, system, tools, signal):
        return True
    request = ModelRequest(
        agent=agent,
        system=system,
        messages=with_brief(agent, agent.messages()),
        tools=tools,
        signal=signal,
    )
    finished, raw = await race(runtime.model.complete(request), signal)
    if not finished:
        return True
    reply = parse_reply(raw)
    calls, oversized = bound_calls(agent, reply.tool_calls)  # an oversized payload is never stored
    content = [text_block(reply.text)] if reply.text else []
    content += [{"type": "tool-call", "id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
    message = AssistantMessage(turn=turn, step=step, content=content, usage=reply.usage, model=reply.model)
    session.append(EventType.ASSISTANT_MESSAGE, message)
    if not calls:
        return True
    await run_tool_calls(agent, calls, turn=turn, step=step, signal=signal, oversized=oversized)
    return False


async def _compact(agent: DrivenAgent, system: str, tools: Sequence[ToolSpec], signal: AbortSignal) -> bool:
    """Compact the context first when it nears the model's window; ``False`` when aborted.

    The summary is asked for before anything is written, so a crash or an abort during
    the call leaves the log as it was. A failed summary call is logged and the step
    goes on with the whole context (the model may still fit it, or fail with its own error).
    """
    plan = plan_compaction(agent, system, tools)
    if plan is None:
        return True
    request = ModelRequest(agent=agent, system=SUMMARY_SYSTEM, messages=plan.messages, tools=(), signal=signal,
                           purpose="compaction")
    try:
        finished, raw = await race(agent.runtime.model.complete(request), signal)
        if not finished:
            return False
        reply = parse_reply(raw)
    except DshError as exc:
        log.warning("compaction failed", agent=agent.id, error=str(exc), code=exc.code)
        return True
    if not reply.text.strip():
        log.warning("compaction failed", agent=agent.id, error="the summary is empty", code="MODEL_BAD_REPLY")
        return True
    record = compaction_record(plan, reply.text.strip(), reply.usage, reply.model)
    agent.session.append(EventType.CONTEXT_COMPACTED, record)
    await agent.session.flush()  # the summary was paid for: keep it
    log.info("context compacted", agent=agent.id, summarised=record.summarised, estimated=record.estimated_tokens,
             window=record.window)
    return True
