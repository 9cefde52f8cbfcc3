"""Shared fixtures-as-functions for the agent-layer tests (no conftest: other helpers own tests/host too)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import msgspec

from host_spec.errors import DshError
from host_spec.events import SessionHeader
from host_spec.host.agents.agent import Agent
from host_spec.host.agents.registry import AgentRegistry, AgentRuntime
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.agents.prompt import PromptRegistry
from host_spec.host.store.session import Session
from host_spec.host.agents.tools import ToolRegistry
from host_spec.records import ToolSpec


@attrs.define
class RecordingHooks:
    """An ``AgentHooks`` stub that records every call; ``veto`` makes ``created`` raise."""

    calls: list[tuple[Any, ...]] = attrs.Factory(list)
    veto: bool = False
    on_status: Callable[[Agent, str], None] | None = None
    fail: set[str] = attrs.Factory(set)  # observer hooks that raise after recording
    on_created: Callable[[Agent], None] | None = None
    brief_text: str = ""  # what brief() answers (not recorded in calls)
    #: ``(turn, step) -> error or None``: admit_step raises what it returns (a refused model call).
    refuse: Callable[[int, int], DshError | None] | None = None

    def created(self, agent: Agent) -> None:
        self.calls.append(("created", agent.id))
        if self.veto:
            raise DshError("vetoed by test", code="TEST_VETO")
        if self.on_created is not None:
            self.on_created(agent)

    def session_start(self, agent: Agent, source: str) -> None:
        self.calls.append(("session_start", agent.id, source))
        self._maybe_fail("session_start")

    def status(self, agent: Agent, status: str) -> None:
        self.calls.append(("status", agent.id, status))
        if self.on_status is not None:
            self.on_status(agent, status)

    def turn_end(self, agent: Agent, turn: int, reason: dict) -> None:
        self.calls.append(("turn_end", agent.id, turn, reason))
        self._maybe_fail("turn_end")

    def admit_step(self, agent: Agent, turn: int, step: int) -> None:
        refusal = self.refuse(turn, step) if self.refuse is not None else None
        if refusal is not None:
            raise refusal

    def disposed(self, agent: Agent) -> None:
        self.calls.append(("disposed", agent.id))
        self._maybe_fail("disposed")

    def brief(self, agent: Agent) -> str:
        self._maybe_fail("brief")
        return self.brief_text

    def _maybe_fail(self, hook: str) -> None:
        if hook in self.fail:
            raise RuntimeError(f"{hook} observer bug")

    def statuses(self, agent_id: str) -> list[str]:
        return [c[2] for c in self.calls if c[0] == "status" and c[1] == agent_id]

    def turn_ends(self, agent_id: str) -> list[tuple[int, dict]]:
        return [(c[2], c[3]) for c in self.calls if c[0] == "turn_end" and c[1] == agent_id]


@attrs.define
class Kit:
    registry: AgentRegistry
    tools: ToolRegistry
    prompts: PromptRegistry
    model: Any
    hooks: RecordingHooks


def make_kit(script: Mapping[str, Any] | None = None, *, model: Any = None, sessions: Any = None) -> Kit:
    tools, prompts, hooks = ToolRegistry(), PromptRegistry(), RecordingHooks()
    model = model if model is not None else ScriptedModel.from_mapping(script or {})
    registry = AgentRegistry(AgentRuntime(sessions, tools, prompts, model, hooks))
    return Kit(registry, tools, prompts, model, hooks)


def memory_session(session_id: str = "s1", **header: Any) -> Session:
    return Session(SessionHeader(id=session_id, created_at=0, **header))


class EchoArgs(msgspec.Struct, forbid_unknown_fields=True):
    text: str


class EchoOut(msgspec.Struct):
    echoed: str


async def _echo(args: EchoArgs, call: Any) -> EchoOut:
    return EchoOut(echoed=args.text)


def echo_tool(name: str = "echo", description: str = "Echo the text back.", **kw: Any) -> ToolSpec:
    return ToolSpec(name=name, description=description, args_type=EchoArgs, result_type=EchoOut, execute=_echo, **kw)


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass


def gate_tool(name: str, gate: asyncio.Event, *, started: asyncio.Event | None = None, **kw: Any) -> ToolSpec:
    """A tool whose body blocks until ``gate`` is set or the call is aborted."""

    async def execute(args: NoArgs, call: Any) -> dict[str, Any]:
        if started is not None:
            started.set()
        waiter = asyncio.ensure_future(gate.wait())
        aborted = asyncio.ensure_future(call.signal.wait())
        await asyncio.wait({waiter, aborted}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        aborted.cancel()
        return {"released": gate.is_set(), "aborted": call.signal.aborted}

    return ToolSpec(name=name, description="Blocks.", args_type=NoArgs, result_type=dict[str, bool], execute=execute, **kw)


def types(session: Any, start: int = 0) -> list[str]:
    return [e.type for e in session.events[start:]]


def find(session: Any, type_: str) -> list[Any]:
    return [e.value() for e in session.events if e.type == type_]
