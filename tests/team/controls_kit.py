"""A real host for the controls suites: JSONL logs, the Team and invariant plugins, the workspace plugin over a real directory.

Teammates are real child sessions on the Lead's roster (written the way the
roster writes them), so a test can act as any member and call the host's real
tool pipeline (``host.tools.execute``): the ``dsh_tool_pre_call`` veto, argument
decoding and error results are the ones a model gets. Checks run as real
``/bin/bash`` processes in the workspace. Nothing of ours is mocked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_team.controls import ControlsState, replay_controls
from dsh_team.service import TeamService
from dsh_team.api import TeamServiceAPI
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore
from host_spec.records import AbortSignal

from team_host import add_member

_calls = iter(range(1, 1 << 30))


async def open_host(tmp_path: Path, config: Mapping[str, Any] | None = None, *, workspace: bool = True) -> Host:
    host = await Host.open(tmp_path / "data", None, ScriptedModel.from_mapping({}))
    host.plugins.load("dsh-team", dict(config or {}))
    host.plugins.load("dsh-team-invariant")
    if workspace:
        host.plugins.load("workspace", {})
    return host


def team_service(host: Host) -> TeamService:
    found = host.service(TeamServiceAPI)
    assert isinstance(found, TeamService)
    return found


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    return root


async def lead_in(host: Host, root: Path | None, *, resume: bool = False) -> Any:
    if resume:
        session = await host.resume_session("lead")
        return host.start_agent(session, name="lead", source="resume")
    session = await host.create_session("lead", cwd=None if root is None else str(root))
    return host.start_agent(session, name="lead")


async def teammate(host: Host, lead: Any, name: str, index: int = 1, *, plan: bool = False) -> Any:
    """An active teammate ``name`` (its plan approval recorded first when ``plan``)."""
    service = team_service(host)
    if plan:
        await service.plans.require(service.journals.get(lead.session), lead.id, name)
    session = await host.create_session(f"child-{index}", parent_session=lead.id, cwd=lead.session.header.cwd)
    agent = host.start_agent(session, name=name)
    await add_member(host, lead, agent.id, name)
    return agent


async def call(host: Host, agent: Any, name: str, **arguments: Any) -> tuple[str | None, Any]:
    """Call tool ``name`` as ``agent``: ``(error code or None, decoded result or error message)``."""
    message = await host.tools.execute(agent, f"call-{next(_calls)}", name, json.dumps(arguments), AbortSignal())
    if message.is_error:
        return message.error["code"], message.error["message"]
    return None, json.loads(message.content[0]["text"])


def stored_controls(tmp_path: Path, team_id: str = "lead") -> ControlsState:
    """The controls fold of the Lead log as read from its file (what a restarted process sees)."""
    return replay_controls(JsonlStore(tmp_path / "data").read(team_id)[1], team_id)


def of_type(events: Any, event_type: str) -> list[Any]:
    return [event.value() for event in events if event.type == event_type]
