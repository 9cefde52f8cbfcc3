"""``dsh team plan``: the user decides on a plan between runs, through the real CLI and real logs.

A run ends with a plan submitted and nobody deciding (the scripted Lead does not).
``dsh team plan reject`` and ``approve`` write the decision and its notice into the
stored Lead log; each ``dsh resume`` delivers the notice and the teammate goes on
(a revised plan, then its first write). A decision the fold would refuse, and any
decision while a run holds the log, write nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsh_team.controls import replay_controls
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore

from test_team_crash import DSH

pytestmark = pytest.mark.slow

SCRIPT = {
    "lead": [
        {"text": "a planner", "tool_calls": [
            {"name": "spawn_teammate", "arguments": {"name": "planner", "description": "p", "prompt": "plan",
                                                     "plan_approval": True}}]},
        {"text": "waiting for the user"},
    ],
    "planner": [
        {"text": "v1", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "lead", "plan": "submit", "message": "v1"}}]},
        {"when": "Your plan was rejected", "text": "v2", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "lead", "plan": "submit", "message": "v2"}}]},
        {"when": "Your plan is approved", "text": "writing", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "ok.txt", "content": "approved by the user"}}]},
        {"text": "done"},
    ],
}  # fmt: skip


def dsh(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*DSH, *args, "--data-dir", str(tmp_path / "data")], capture_output=True, timeout=120)


def resume(tmp_path: Path) -> None:
    done = dsh(tmp_path, "resume", "--profile", "agent-teams", "--model", f"scripted:{tmp_path / 's.json'}")
    assert done.returncode in (0, 1), done.stderr.decode()[-2000:]


def plan_of(tmp_path: Path) -> Any:
    return replay_controls(JsonlStore(tmp_path / "data").read("session-1")[1], "session-1").plan("planner")


@pytest.mark.timeout_s(300)
async def test_the_user_rejects_then_approves_between_runs(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps(SCRIPT))
    ws = tmp_path / "ws"
    ws.mkdir()
    ran = dsh(tmp_path, "run", "--profile", "agent-teams", "--model", f"scripted:{tmp_path / 's.json'}",
              "--workspace", str(ws), "go")
    assert ran.returncode == 0, ran.stderr.decode()[-2000:]
    assert (plan_of(tmp_path).status, plan_of(tmp_path).plan) == ("submitted", "v1")

    for args, code in ((("approve", "nobody"), "TEAM_MEMBER_NOT_FOUND"), (("submit", "planner"), None)):
        refused = dsh(tmp_path, "team", "plan", *args)
        assert refused.returncode == 2
        assert code is None or code.encode() in refused.stderr, refused.stderr.decode()

    rejected = dsh(tmp_path, "team", "plan", "reject", "planner", "--feedback", "name the files")
    assert rejected.returncode == 0, rejected.stderr.decode()
    assert b"planner is told when the run resumes" in rejected.stdout
    assert (plan_of(tmp_path).status, plan_of(tmp_path).by) == ("rejected", "user")
    again = dsh(tmp_path, "team", "plan", "reject", "planner")
    assert again.returncode == 2 and b"TEAM_PLAN_INVALID" in again.stderr  # nothing submitted since

    resume(tmp_path)
    assert (plan_of(tmp_path).status, plan_of(tmp_path).plan, plan_of(tmp_path).rounds) == ("submitted", "v2", 2)
    assert not (ws / "ok.txt").exists()

    # A live run holds the Lead log: the CLI refuses and writes nothing.
    host = await Host.open(tmp_path / "data", "agent-teams", ScriptedModel.from_mapping({}))
    try:
        await host.resume_session("session-1")
        locked = dsh(tmp_path, "team", "plan", "approve", "planner")
        assert locked.returncode == 2 and b"SESSION_LOCKED" in locked.stderr, locked.stderr.decode()
    finally:
        await host.close()
    assert plan_of(tmp_path).status == "submitted"

    assert dsh(tmp_path, "team", "plan", "approve", "planner").returncode == 0
    resume(tmp_path)
    assert (ws / "ok.txt").read_text() == "approved by the user"
    show = dsh(tmp_path, "team", "show").stdout.decode()
    assert "plan of planner: approved (by user, 2 submitted)" in show
