"""The host's permission gate: every tool call checked against the profile's rules before it runs.

Asked by :meth:`~host_spec.host.agents.tools.ToolRegistry.execute` once a call's
arguments decoded and before any veto, placement or body. The rules decide
(:func:`host_spec.permissions.evaluate`):

* **allow**: the call goes on;
* **deny**: its result is ``PERMISSION_DENIED`` naming the rule, nothing runs;
* **ask**: a ``tool/permission`` ``asked`` mark is made durable in the agent's own
  log, then the host's :class:`~host_spec.permissions.PermissionRouter` records the
  request (once per call, whoever asks again) and the call waits for its answer
  while every other agent goes on. An allowed call gets the ``allowed`` mark (made
  durable) before its body runs, so a crash in between can never run it twice
  (crash repair: a call asked and not allowed is held and asked again on resume; an
  allowed one without a result is ``TOOL_OUTCOME_UNKNOWN``). A denial (an answer, or
  the deadline) is ``PERMISSION_DENIED`` saying who denied it and why.

With no router for the agent (a profile without the Team plugin, an agent outside
a Team) an ask cannot be answered and is denied at once: never silently allowed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import msgspec

from host_spec.messages import ToolResultMessage
from host_spec.permissions import (
    TOOL_PERMISSION,
    PermissionMark,
    PermissionRequest,
    PermissionRouter,
    PermissionSettings,
    RuleSet,
    evaluate,
    exact_rule,
)

from host_spec.host.agents.tools import error_result

if TYPE_CHECKING:
    from host_spec.protocols import Agent
    from host_spec.records import AbortSignal

__all__ = ["PermissionGate"]

_DECODER = msgspec.json.Decoder()


@attrs.define(eq=False)
class PermissionGate:
    """The rules of one host, compiled once, and where asks go.

    Attributes:
        settings: The profile's ``[permissions]`` table.
        router: Returns the host's router, or ``None`` (asked per call: a plugin may load later).
    """

    settings: PermissionSettings
    router: Callable[[], PermissionRouter | None]
    rules: RuleSet = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.rules = self.settings.rules()

    async def check(
        self, agent: Agent | None, call_id: str, name: str, raw: bytes, signal: AbortSignal, *, turn: int, step: int
    ) -> ToolResultMessage | None:
        """``None`` to run the call, else its refusal as a tool result (see the module docstring)."""
        if agent is None:
            return None
        held = call_id in _held_ids(agent)
        arguments = _arguments(raw)
        verdict = evaluate(self.rules, name, arguments, agent.session.header.cwd)
        if verdict.decision == "allow" and not held:
            return None

        def refused(text: str) -> ToolResultMessage:
            return error_result(call_id, name, "PERMISSION_DENIED", text, turn=turn, step=step)

        if verdict.decision == "deny":
            return refused(f'{name} is denied by the permission rule "{verdict.rule}"; nothing ran')
        router = self.router()
        if router is None or not router.routes(agent):
            return refused(f'the permission rule "{verdict.rule}" asks before {name} runs, and no one can answer '
                           "this agent's asks; nothing ran")  # fmt: skip
        session = agent.session
        if not held:
            session.append(TOOL_PERMISSION, PermissionMark(call_id=call_id, phase="asked", rule=verdict.rule))
            await session.flush()  # the ask is on record before anyone is asked
        request = PermissionRequest(
            key=f"{agent.id}/{turn}/{step}/{call_id}", call_id=call_id, tool=name,
            arguments=raw.decode(errors="replace"), rule=verdict.rule, timeout_ms=self.settings.ask_timeout_ms,
            delegate=self.settings.delegate, always_rule=exact_rule(name, arguments),
        )  # fmt: skip
        asking = asyncio.ensure_future(router.ask(agent, request))
        aborted = asyncio.ensure_future(signal.wait())
        try:
            await asyncio.wait({asking, aborted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            aborted.cancel()
            if not asking.done():
                asking.cancel()
                await asyncio.gather(asking, return_exceptions=True)
        if asking.cancelled():
            return error_result(call_id, name, "ABORTED", "tool call aborted while its permission ask was open",
                                turn=turn, step=step)  # fmt: skip
        answer = asking.result()
        if answer.decision == "deny":
            why = f": {answer.reason}" if answer.reason else ""
            return refused(f"permission ask {answer.ask_id} for {name} was denied by {answer.by}{why}; nothing ran")
        session.append(TOOL_PERMISSION, PermissionMark(call_id=call_id, phase="allowed", ask_id=answer.ask_id,
                                                       by=answer.by))  # fmt: skip
        await session.flush()  # allowed on record before the body runs: never run twice
        return None


def _held_ids(agent: Agent) -> frozenset[str]:
    """The call ids of ``agent``'s turn continued after a restart on open asks (the host's agents know them)."""
    ids = getattr(agent, "held_asks", None)
    return ids if isinstance(ids, frozenset) else frozenset()


def _arguments(raw: bytes) -> dict[str, Any]:
    try:
        value = _DECODER.decode(raw) if raw.strip() else {}
    except msgspec.DecodeError:  # pragma: no cover - the registry decoded these arguments already
        return {}
    return value if isinstance(value, dict) else {}
