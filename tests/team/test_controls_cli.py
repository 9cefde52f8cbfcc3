"""``dsh team plan``: the user decides on a plan between runs, through the real CLI and real logs.

A run ends with a plan submitted and nobody deciding (the scripted Lead does not).
``dsh team plan reject`` and ``approve`` write the decision and its notice into the
stored Lead log; each ``dsh resume`` delivers the notice and the teammate goes on
(a revised plan, then its first write). A decision the fold would refuse, and any
decision while a run holds the log, write nothing.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsh_team.controls import PlanRecord, replay_controls
from host_spec.host.store.session import NullObserver
from host_spec.host.store.sessions import SessionStore
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore

from host_spec.host.cli.main import main

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


def decide(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``dsh team plan ARGS`` in this process: ``(exit status, stdout + stderr)``."""
    status = main(["team", "plan", *args, "--data-dir", str(tmp_path / "data")])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def started_run(tmp_path: Path) -> Path:
    (tmp_path / "s.json").write_text(json.dumps(SCRIPT))
    ws = tmp_path / "ws"
    ws.mkdir()
    ran = dsh(tmp_path, "run", "--profile", "agent-teams", "--model", f"scripted:{tmp_path / 's.json'}",
              "--workspace", str(ws), "go")
    assert ran.returncode == 0, ran.stderr.decode()[-2000:]
    assert (plan_of(tmp_path).status, plan_of(tmp_path).plan) == ("submitted", "v1")
    return ws


@pytest.mark.timeout_s(300)
def test_the_user_rejects_then_approves_between_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = started_run(tmp_path)
    for args, code in ((("approve", "nobody"), "TEAM_MEMBER_NOT_FOUND"), (("approve", "planner", "session-9"),
                                                                            "SESSION_NOT_FOUND")):
        status, output = decide(tmp_path, capsys, *args)
        assert status == 2 and code in output, output

    status, output = decide(tmp_path, capsys, "reject", "planner", "--feedback", "name the files")
    assert status == 0 and "planner is told when the run resumes" in output, output
    assert (plan_of(tmp_path).status, plan_of(tmp_path).by) == ("rejected", "user")
    status, output = decide(tmp_path, capsys, "reject", "planner")
    assert status == 2 and "TEAM_PLAN_INVALID" in output  # nothing submitted since

    resume(tmp_path)
    assert (plan_of(tmp_path).status, plan_of(tmp_path).plan, plan_of(tmp_path).rounds) == ("submitted", "v2", 2)
    assert not (ws / "ok.txt").exists()

    assert decide(tmp_path, capsys, "approve", "planner")[0] == 0
    resume(tmp_path)
    assert (ws / "ok.txt").read_text() == "approved by the user"
    show = dsh(tmp_path, "team", "show").stdout.decode()
    assert "plan of planner: approved (by user, 2 submitted)" in show


@pytest.mark.timeout_s(300)
async def test_a_live_run_holds_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started_run(tmp_path)
    host = await Host.open(tmp_path / "data", "agent-teams", ScriptedModel.from_mapping({}))
    try:
        await host.resume_session("session-1")
        locked = dsh(tmp_path, "team", "plan", "approve", "planner")
        err = locked.stderr.decode()
        assert locked.returncode == 2 and "dsh: TEAM_RUN_LIVE:" in err, err
        assert "web panel's Controls card" in err and "dsh run --web" in err  # the way that works while it is live
        status, output = await asyncio.to_thread(decide, tmp_path, capsys, "approve", "planner")  # in this process too
        assert status == 2 and "dsh: TEAM_RUN_LIVE:" in output, output
    finally:
        await host.close()
    assert plan_of(tmp_path).status == "submitted"


async def corrupt(tmp_path: Path) -> None:
    """Append another Team's plan record (ignored) and one the controls fold refuses (a plan never required)."""
    sessions = SessionStore(JsonlStore(tmp_path / "data"), NullObserver())
    stored = sessions.resume("session-1")
    stored.append("team/plan", PlanRecord(version=1, team_id="other", member="x", action="required", by="lead"))
    stored.append("team/plan", PlanRecord(version=1, team_id="session-1", member="ghost", action="approved", by="user"))
    await sessions.dispose(stored)


@pytest.mark.timeout_s(300)
def test_nothing_is_decided_on_a_team_whose_controls_do_not_fold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started_run(tmp_path)
    asyncio.run(corrupt(tmp_path))
    status, output = decide(tmp_path, capsys, "approve", "planner")
    assert status == 2 and "TEAM_STREAM_FAILED" in output, output
    assert plan_of(tmp_path) is None or plan_of(tmp_path).status == "submitted"
    assert main(["trace", "export", "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "t.json")]) == 0
    events = [ev for rs in json.loads((tmp_path / "t.json").read_text())["resourceSpans"] for ss in rs["scopeSpans"]
              for span in ss["spans"] for ev in span.get("events", []) if ev["name"].startswith("team.")]
    names = [ev["name"] for ev in events if ev["name"].startswith(("team.plan", "team.controls"))]
    assert sorted(names) == ["team.controls.failed", "team.plan", "team.plan"]  # the other Team's record is no event
