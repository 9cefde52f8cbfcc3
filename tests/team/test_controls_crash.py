"""Controls through the real CLI: SIGKILL during a running check, then ``dsh resume``.

``dsh run`` (a real subprocess, the scripted model, the Agent Teams profile plus a
named check) runs a Team whose teammate is spawned with ``plan_approval``: its
first write is refused, it submits a plan, the Lead approves, it writes and
completes its task, whose check blocks on a file the test holds. While the check
runs, the test SIGKILLs the whole ``dsh`` process (no cleanup, no final flush).
The Lead log then holds a run that was started and never finished; the task is
still ``in_progress``. ``dsh resume`` runs the check again (the command counts its
runs in a file), records its end (``rerun``), completes the task and tells the
teammate; the approval of the plan is still in force after the restart (the
teammate's next write succeeds).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from dsh_team.controls import replay_controls
from dsh_team.core.fold import replay
from host_spec.host.store.jsonl import JsonlStore

from test_team_crash import DSH

pytestmark = pytest.mark.slow

CHECK = "echo run >> ../runs.txt; while [ -f ../hold ]; do sleep 0.05; done; test -f done.txt"

SCRIPT = {
    "lead": [
        {"text": "task and planner", "tool_calls": [
            {"name": "team_task_create", "arguments": {"subject": "s", "description": "d", "checks": ["slow"]}},
            {"name": "spawn_teammate", "arguments": {"name": "builder", "description": "b", "prompt": "do task-1",
                                                     "plan_approval": True}}]},
        {"when": "Plan from builder", "text": "approving", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "builder", "plan": "approve", "message": "ok"}}]},
        {"text": "waiting"},
    ],
    "builder": [
        {"text": "write first", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "early.txt", "content": "x"}}]},
        {"when": "needs an approved plan", "text": "plan", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "lead", "plan": "submit", "message": "write done.txt"}}]},
        {"when": "Your plan is approved", "text": "working", "tool_calls": [
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 1, "action": "claim"}},
            {"name": "write_file", "arguments": {"path": "done.txt", "content": "done"}},
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 2,
                                                       "action": "complete"}}]},
        {"when": "ran again after a restart", "text": "after the restart", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "after.txt", "content": "still approved"}}]},
        {"text": "finished"},
    ],
}  # fmt: skip


def until(predicate: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.timeout_s(300)
def test_sigkill_during_a_check_reruns_it_on_resume_and_the_approval_survives(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    profile = tmp_path / "controls.toml"
    # Unsandboxed: the check counts its runs and waits on files beside the workspace.
    profile.write_text(f'extends = "agent-teams"\n\n[sandbox]\npolicy = "full"\n\n'
                       f'[plugins.dsh-team.checks]\nslow = {json.dumps(CHECK)}\n')
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "hold").write_text("")
    common = ["--profile", str(profile), "--model", f"scripted:{tmp_path / 'script.json'}",
              "--data-dir", str(tmp_path / "data")]  # fmt: skip
    run = subprocess.Popen([*DSH, "run", *common, "--workspace", str(ws), "build it"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    try:
        until(lambda: (tmp_path / "runs.txt").exists() or run.poll() is not None, 120, "the check to start")
        assert run.poll() is None, run.communicate()[1].decode()[-2000:]
        os.kill(run.pid, signal.SIGKILL)  # dsh only: the check runs in its own process group
        run.wait(30)
    finally:
        if run.poll() is None:
            run.kill()
        (tmp_path / "hold").unlink()  # the orphaned check ends by itself
    assert run.returncode == -signal.SIGKILL
    assert (ws / "done.txt").exists() and not (ws / "early.txt").exists()  # refused before the approval

    lead = JsonlStore(tmp_path / "data").read("session-1")[1]
    controls = replay_controls(lead, "session-1")
    (cut,) = controls.listed()
    assert cut.open and controls.plan("builder").status == "approved"  # type: ignore[union-attr]
    assert replay(lead, "session-1").tasks.tasks["task-1"].status == "in_progress"  # never completed silently

    resumed = subprocess.run([*DSH, "resume", *common], capture_output=True, timeout=120)
    assert resumed.returncode in (0, 1), resumed.stderr.decode()[-2000:]
    assert (tmp_path / "runs.txt").read_text().splitlines() == ["run", "run"]  # run again
    lead = JsonlStore(tmp_path / "data").read("session-1")[1]
    controls = replay_controls(lead, "session-1")
    (run_again,) = controls.listed()
    assert run_again.finished is not None and run_again.finished.passed and run_again.finished.rerun
    assert controls.failure is None
    assert replay(lead, "session-1").tasks.tasks["task-1"].status == "completed"
    assert (ws / "after.txt").read_text() == "still approved"  # the approval held across the crash
