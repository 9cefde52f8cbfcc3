"""A real reference host for the Team tool plugin tests (no fakes of our own layers)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from dsh_team.api import TeamServiceAPI
from dsh_team_tools.catalog import TOOL_NAMES
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel

TEAM_PLUGINS: tuple[tuple[str, Mapping[str, Any]], ...] = (
    ("dsh-team", {}),
    ("dsh-team-tools", {}),
    ("dsh-team-invariant", {}),
)


@asynccontextmanager
async def open_host(
    data_dir: Path,
    script: Mapping[str, Any] | None = None,
    *,
    profile: str | None = None,
    plugins: Sequence[tuple[str, Mapping[str, Any]]] = (),
    extra_plugins: Sequence[tuple[str, object]] = (),
) -> AsyncIterator[Host]:
    """A host on a JSONL store in ``data_dir`` with a scripted model; closed on exit."""
    host = await Host.open(data_dir, profile, ScriptedModel.from_mapping(script or {}), extra_plugins=extra_plugins)
    try:
        for name, config in plugins:
            host.plugins.load(name, config)
        yield host
    finally:
        await host.close()


async def start_root(host: Host, name: str = "lead") -> Any:
    """A published root agent (a Team Lead), not yet running."""
    session = await host.create_session()
    return host.start_agent(session, name=name)


def is_team_tool(spec: Any) -> bool:
    """Whether a visible spec is one of ours (by its argument type's package, reload-proof)."""
    return str(spec.args_type.__module__).startswith("dsh_team_tools.")


def team_tools(host: Host, agent: Any) -> list[str]:
    """The Team tool names ``agent`` can see (in catalogue order)."""
    visible = {spec.name for spec in host.tools.visible(agent) if is_team_tool(spec)}
    return [name for name in TOOL_NAMES if name in visible]


def installer(host: Host) -> Any:
    """The tools plugin's per-host installer (its registered hook object), or ``None`` when not loaded."""
    found = host.plugins.hook_objects("dsh-team-tools")
    return found[0] if found else None


@contextmanager
def restored_modules(prefix: str) -> Iterator[None]:
    """Put ``prefix``'s modules back after a test that hot-reloads them."""
    saved = {name: module for name, module in sys.modules.items() if name == prefix or name.startswith(prefix + ".")}
    try:
        yield
    finally:
        for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
            del sys.modules[name]
        sys.modules.update(saved)
        for name, module in saved.items():
            parent, _, child = name.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], child, module)


class GatedModel:
    """The scripted model, except that named agents wait on a gate before each answer.

    A gated agent stays ``running`` (mid model call) for as long as the test wants,
    which is how a test gets a busy teammate without timing assumptions.
    """

    def __init__(self, script: Mapping[str, Any], gated: Sequence[str] = ()) -> None:
        self.inner = ScriptedModel.from_mapping(script)
        self.gates = {name: asyncio.Event() for name in gated}
        self.entered = {name: asyncio.Event() for name in gated}
        self.first: dict[str, Any] = {}  # agent name -> its first ModelRequest (tool specs included)

    @property
    def requests(self) -> Any:
        return self.inner.requests

    async def complete(self, request: Any) -> Any:
        name = request.agent.name
        self.first.setdefault(name, request)
        gate = self.gates.get(name)
        if gate is not None:
            self.entered[name].set()
            await gate.wait()
        return await self.inner.complete(request)


@asynccontextmanager
async def open_team(
    data_dir: Path, model: Any, *, tools_config: Mapping[str, Any] | None = None,
    team_config: Mapping[str, Any] | None = None,
) -> AsyncIterator[Host]:
    """An agent-teams host (dsh-team, dsh-team-tools, dsh-team-invariant) on ``model``."""
    host = await Host.open(data_dir, None, model)
    try:
        host.plugins.load("dsh-team", dict(team_config or {}))
        host.plugins.load("dsh-team-tools", dict(tools_config or {}))
        host.plugins.load("dsh-team-invariant", {})
        yield host
    finally:
        await host.close()


async def call(host: Host, agent: Any, name: str, args: Mapping[str, Any] | None = None,
               signal: Any = None) -> tuple[Any, dict[str, Any] | None]:
    """Execute one tool as ``agent``: ``(decoded JSON result, None)`` or ``(None, error)``."""
    from host_spec.events import json_decode, json_encode
    from host_spec.records import AbortSignal

    result = await host.tools.execute(agent, "call", name, json_encode(dict(args or {})).decode(),
                                      signal or AbortSignal())
    if result.is_error:
        assert result.content[0]["text"] == f"Error: {result.error['message']}"
        return None, result.error
    return json_decode(result.content[0]["text"]), None


def agent_named(host: Host, name: str) -> Any:
    """The live agent with this scripted name."""
    (found,) = [agent for agent in host.agents.list() if agent.name == name]
    return found


async def member_events(host: Host, lead: Any, name: str) -> list[Any]:
    """The events of member ``name``'s session, live or (after it settled) as stored."""
    (view,) = [v for v in host.service(TeamServiceAPI).list_members(lead) if v.name == name]
    live = host.agents.get(view.id)
    if live is not None:
        return list(live.session.events)
    return list((await host.sessions.inspect(view.id)).events)
