"""A role's sandbox policy: ``[sandbox.roles."NAME"]`` confines every teammate spawned with that role.

A real host (the Agent Teams profile, the real bubblewrap sandbox, real JSONL
files, the scripted model). ``rita`` is spawned with the ``reviewer`` role, whose
profile policy is ``read-only``; ``bob`` has no role. The oracles are the
workspace on disk and the logs a restarted process reads: rita's ``bash`` and
her task's checks cannot write, bob's can, and a cold resume keeps her role.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from dsh_team.service import TeamService
from dsh_team.api import TeamServiceAPI
from host_spec.events import EventType
from host_spec.host.app import Host
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import text_block

PROFILE = """extends = "agent-teams"

[plugins.dsh-team.roles.reviewer]
description = "Reviews, never writes"

[sandbox.roles.reviewer]
policy = "read-only"
"""


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


SCRIPT = {
    "lead": [
        {"text": "planning", "tool_calls": [
            {"name": "team_task_create", "arguments": {"subject": "s", "description": "d", "checks": ["touch gated.txt"]}},
            {"name": "spawn_teammate", "arguments": {"name": "rita", "description": "", "prompt": "review",
                                                     "role": "reviewer"}},
            {"name": "spawn_teammate", "arguments": {"name": "bob", "description": "builds", "prompt": "build"}}]},
        {"text": "spawned"},
        {"when": "resumed", "text": "ok"},
    ],
    "rita": [
        {"text": "trying", "tool_calls": [
            bash("echo r > rita.txt"),
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 1, "action": "claim"}}]},
        {"text": "completing", "tool_calls": [
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 2,
                                                       "action": "complete"}}]},
        {"text": "reviewed"},
        {"when": "again", "text": "again", "tool_calls": [bash("echo r > rita-again.txt")]},
        {"text": "still read-only"},
    ],
    "bob": [
        {"text": "building", "tool_calls": [bash("echo b > bob.txt")]},
        {"text": "built"},
    ],
}  # fmt: skip


async def open_team(tmp_path: Path) -> Host:
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    (tmp_path / "profile.toml").write_text(PROFILE)
    return await Host.open(tmp_path / "data", tmp_path / "profile.toml", f"scripted:{tmp_path / 'script.json'}")


def service_of(host: Host) -> TeamService:
    found: TeamService = host.service(TeamServiceAPI)
    return found


async def asleep(host: Host, ids: list[str]) -> None:
    for member in ids:
        agent = host.agents.get(member)
        if agent is not None:
            await agent.when_idle()


def results(store: JsonlStore, member: str) -> list[dict[str, Any]]:
    return [e.value() for e in store.read(member)[1] if e.type == EventType.TOOL_RESULT]


async def test_a_roles_policy_confines_its_members_commands_and_checks_and_survives_a_resume(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    host = await open_team(tmp_path)
    root = await host.run("go", cwd=str(ws))
    rows = {row.name: row.id for row in service_of(host).list_members(root)}
    await asleep(host, list(rows.values()))
    await host.close()

    assert (ws / "bob.txt").read_text() == "b\n"  # no role: the profile's workspace-write
    assert not (ws / "rita.txt").exists() and not (ws / "gated.txt").exists()
    store = JsonlStore(tmp_path / "data")
    outputs = [json.dumps(r["content"]) for r in results(store, rows["rita"])]
    assert "Read-only file system" in outputs[0]
    assert "stays in_progress" in outputs[2] and "Read-only file system" in outputs[2]  # her check, her role
    descriptor = next(e.value() for e in store.read(rows["rita"])[1] if e.type == EventType.SUBAGENT_DESCRIPTOR)
    assert descriptor["role"] == "reviewer"
    assert "role" not in next(e.value() for e in store.read(rows["bob"])[1] if e.type == EventType.SUBAGENT_DESCRIPTOR)

    host = await open_team(tmp_path)  # a cold resume: the role comes back from rita's descriptor
    session = await host.resume_session(root.id)
    lead = host.start_agent(session, name="lead", source="resume")
    await service_of(host).send_message(lead, target="rita", content=[text_block("again")])
    agent = host.agents.get(rows["rita"])
    assert agent is not None and agent.role == "reviewer"
    await agent.when_idle()
    await host.close()
    assert not (ws / "rita-again.txt").exists()
    assert "Read-only file system" in json.dumps(results(JsonlStore(tmp_path / "data"), rows["rita"])[-1]["content"])


def test_the_runs_header_and_team_show_name_the_roles_policy(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = {"lead": [SCRIPT["lead"][0], {"text": "spawned"}], "rita": [SCRIPT["rita"][0], {"text": "reviewed"}],
              "bob": SCRIPT["bob"]}
    (tmp_path / "script.json").write_text(json.dumps(script))
    (tmp_path / "profile.toml").write_text(PROFILE)
    env = {k: v for k, v in os.environ.items() if k != "DSH_DATA_DIR"}
    dsh = [sys.executable, "-m", "host_spec.host.cli.main"]
    done = subprocess.run([*dsh, "run", "--profile", str(tmp_path / "profile.toml"), "--model",
                           f"scripted:{tmp_path / 'script.json'}", "--data-dir", str(tmp_path / "data"),
                           "--workspace", str(ws), "go"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sandbox: workspace-write (bubblewrap, network off); members: role reviewer=read-only" in done.stderr
    assert (ws / "bob.txt").exists() and not (ws / "rita.txt").exists()
    show = subprocess.run([*dsh, "team", "show", "--data-dir", str(tmp_path / "data")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert show.returncode == 0, show.stderr
    assert show.stdout.rstrip().endswith(
        "Sandbox: lead workspace-write, rita read-only, bob workspace-write; UNSANDBOXED: none")
