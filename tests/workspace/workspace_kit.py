"""A real reference host with the ``workspace`` plugin over a real directory, for the workspace tests.

Tools are called through the host's own tool pipeline (``host.tools.execute``):
argument decoding, the ``cause`` of appended events and error results are the
ones a model gets. Nothing of ours is mocked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.plugins.profiles import Profile
from host_spec.host.sandbox.policy import load_settings
from host_spec.records import AbortSignal


@attrs.define
class Outcome:
    """One tool result: ``value`` (decoded JSON) or ``code``/``message`` for an error."""

    value: Any = None
    code: str | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.code is None


def sandboxed(sandbox: dict[str, Any]) -> Profile:
    """A profile with no plugins and the given ``[sandbox]`` table (``{"policy": "full"}``: unsandboxed)."""
    return Profile(name="test-sandbox", plugins=(), sandbox=load_settings(sandbox))


async def open_host(data: Path, config: dict[str, Any] | None = None, *, team: bool = False,
                    sandbox: dict[str, Any] | None = None) -> Host:
    """A host with the workspace plugin; ``sandbox`` is its ``[sandbox]`` table (default: workspace-write)."""
    host = await Host.open(data, None if sandbox is None else sandboxed(sandbox), ScriptedModel.from_mapping({}))
    if team:
        host.plugins.load("dsh-team", {})
    host.plugins.load("workspace", config or {})
    return host


async def agent_in(host: Host, workspace: Path | None, session_id: str = "lead", *, parent: Any = None,
                   name: str = "lead") -> Any:
    options: dict[str, Any] = {"cwd": None if workspace is None else str(workspace)}
    if parent is not None:
        options["parent_session"] = parent.id
    session = await host.create_session(session_id, **options)
    return host.start_agent(session, name=name)


_calls = iter(range(1, 1 << 30))


async def call(host: Host, agent: Any, name: str, signal: AbortSignal | None = None, **arguments: Any) -> Outcome:
    """Call tool ``name`` as ``agent`` through the host's pipeline."""
    message = await host.tools.execute(agent, f"call-{next(_calls)}", name, json.dumps(arguments),
                                       signal or AbortSignal())
    if message.is_error:
        return Outcome(code=message.error["code"], message=message.error["message"])
    return Outcome(value=json.loads(message.content[0]["text"]))


def events_of(agent: Any, kind: str) -> list[Any]:
    return [event for event in agent.session.events if event.type == kind]


async def calls(
    data: Path, ws: Path, *requests: tuple[str, dict[str, Any]], config: dict[str, Any] | None = None
) -> list:
    """Open a host over ``ws``, make ``(tool, arguments)`` calls in order as one agent, close it."""
    host = await open_host(data, config)
    try:
        agent = await agent_in(host, ws)
        return [await call(host, agent, name, **arguments) for name, arguments in requests]
    finally:
        await host.close()
