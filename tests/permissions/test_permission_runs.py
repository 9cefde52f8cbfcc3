"""Permission rules and durable asks through the real CLI: real runs, real logs, SIGKILL of the real process.

Each case writes a profile (``agent-teams`` plus a ``[permissions]`` table) and a
script, runs ``dsh run`` in a subprocess, and reads the Lead log on disk. The
command under an ask appends a line to ``out.txt`` in the workspace, so "ran at
most once" is a line count. A case that must stop while an ask is open waits
for the ``permission/requested`` record to be durable, then kills the process
with SIGKILL.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

DSH = [sys.executable, "-m", "host_spec.host.cli.main"]
WATCH_S = 60.0
ASKED = "echo line >> out.txt"


class Run:
    """One data dir, profile and script, and the ``dsh`` commands on them."""

    def __init__(self, tmp: Path, script: dict[str, Any], **permissions: Any) -> None:
        self.tmp = tmp
        self.data = tmp / "data"
        self.ws = tmp / "ws"
        self.ws.mkdir()
        lines = ['extends = "agent-teams"', "[permissions]"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in permissions.items()]
        (tmp / "p.toml").write_text("\n".join(lines) + "\n")
        (tmp / "s.json").write_text(json.dumps(script))
        self.model = ["--profile", str(tmp / "p.toml"), "--model", f"scripted:{tmp / 's.json'}"]

    def dsh(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*DSH, *args, "--data-dir", str(self.data)], capture_output=True, text=True,
                              timeout=120)  # fmt: skip

    def run(self) -> subprocess.CompletedProcess[str]:
        return self.dsh("run", *self.model, "--workspace", str(self.ws), "go")

    def resume(self) -> subprocess.CompletedProcess[str]:
        return self.dsh("resume", *self.model)

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        argv = [*DSH, *(args or ("run", *self.model, "--workspace", str(self.ws), "go")), "--data-dir", str(self.data)]
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def lead_log(self) -> list[dict[str, Any]]:
        path = self.data / "sessions" / "session-1" / "session.jsonl"
        if not path.exists():
            return []
        events = []
        for line in path.read_text().splitlines()[1:]:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:  # a line being written
                break
        return events

    def records(self, kind: str) -> list[dict[str, Any]]:
        return [event["data"] for event in self.lead_log() if event["type"] == kind]

    def kill_when(self, process: subprocess.Popen[bytes], ready: Any) -> None:
        """SIGKILL ``process`` once ``ready()`` holds (the process must still be running then)."""
        deadline = time.monotonic() + WATCH_S
        while not ready():
            assert process.poll() is None, "the run ended before the point to kill it"
            assert time.monotonic() < deadline, "the run never reached the point to kill it"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()

    def lines(self) -> int:
        out = self.ws / "out.txt"
        return len(out.read_text().splitlines()) if out.exists() else 0

    def transcript(self, member: str) -> str:
        done = self.dsh("team", "transcript", member)
        assert done.returncode == 0, done.stderr
        return done.stdout


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


def test_allowed_denied_and_timed_out(tmp_path: Path) -> None:
    run = Run(tmp_path, {"lead": [
        {"text": "deny", "tool_calls": [bash("rm -f out.txt")]},
        {"text": "ask", "tool_calls": [bash(ASKED)]},
        {"text": "allow", "tool_calls": [bash("echo free > free.txt")]},
        {"text": "done"},
    ]}, default="allow", ask=["bash(echo line*)"], deny=["bash(rm *)"], ask_timeout_ms=800)  # fmt: skip
    done = run.run()
    assert done.returncode == 0, done.stderr[-2000:]
    transcript = run.transcript("lead")
    assert 'bash is denied by the permission rule "bash(rm *)"; nothing ran' in transcript
    assert "permission ask ask-1 for bash was denied by deadline" in transcript
    assert run.lines() == 0  # the asked command never ran
    assert (run.ws / "free.txt").read_text() == "free\n"  # no rule names it: the default allows it
    [requested] = run.records("permission/requested")
    assert (requested["tool"], requested["rule"], requested["member"]) == ("bash", "bash(echo line*)", "lead")
    [answered] = run.records("permission/answered")
    assert (answered["ask_id"], answered["decision"], answered["by"]) == ("ask-1", "deny", "deadline")
    show = run.dsh("team", "show")
    assert "Permissions" in show.stdout and "ask-1" in show.stdout and "deny by deadline" in show.stdout


def test_permit_on_a_stopped_run_then_resume_runs_the_command_once(tmp_path: Path) -> None:
    run = Run(tmp_path, {"lead": [{"text": "ask", "tool_calls": [bash(ASKED)]}, {"text": "done"}]},
              default="ask", ask_timeout_ms=3_600_000)  # fmt: skip
    run.kill_when(run.start(), lambda: run.records("permission/requested"))
    assert run.records("permission/answered") == [] and run.lines() == 0
    permit = run.dsh("team", "permit", "ask-1", "allow", "--reason", "fine")
    assert permit.returncode == 0, permit.stderr
    again = run.dsh("team", "permit", "ask-1", "deny")
    assert again.returncode != 0 and "PERMISSION_ALREADY_ANSWERED" in again.stderr
    done = run.resume()
    assert done.returncode == 0, done.stderr[-2000:]
    assert run.lines() == 1
    [answered] = run.records("permission/answered")
    assert (answered["decision"], answered["by"], answered["reason"]) == ("allow", "user", "fine")
    assert len(run.records("permission/requested")) == 1  # the resumed call found its ask, never asked twice
    assert run.resume().returncode == 0 and run.lines() == 1  # a further resume runs nothing again


def test_an_open_ask_survives_sigkill_and_resume(tmp_path: Path) -> None:
    run = Run(tmp_path, {"lead": [{"text": "ask", "tool_calls": [bash(ASKED)]}, {"text": "done"}]},
              default="ask", ask_timeout_ms=3_600_000)  # fmt: skip
    run.kill_when(run.start(), lambda: run.records("permission/requested"))
    resumed = run.start("resume", *run.model)
    # The resumed Lead is told the host restarted, and waits on the same ask again.
    run.kill_when(resumed, lambda: "has been restarted" in json.dumps(run.lead_log()))
    assert run.records("permission/answered") == [] and run.lines() == 0  # a restart answers nothing
    assert run.dsh("team", "permit", "ask-1", "allow").returncode == 0
    assert run.resume().returncode == 0
    assert run.lines() == 1 and len(run.records("permission/answered")) == 1
    assert len(run.records("permission/requested")) == 1


SPAWN = {"name": "spawn_teammate", "arguments": {"name": "worker", "description": "w", "prompt": "work"}}


def test_the_lead_answers_a_delegated_ask(tmp_path: Path) -> None:
    run = Run(tmp_path, {
        "lead": [
            {"text": "spawn", "tool_calls": [SPAWN]},
            {"text": "wait", "tool_calls": [{"name": "wait_agent", "arguments": {"timeout_ms": 30000}}]},
            {"when": "Permission request ask-1", "text": "answer", "tool_calls": [{"name": "send_message", "arguments": {
                "target": "worker", "permission": "ask-1", "answer": "allow", "message": "go ahead"}}]},
            {"text": "wait", "tool_calls": [{"name": "wait_agent", "arguments": {"timeout_ms": 30000}}]},
            {"text": "done"},
        ],
        "worker": [{"text": "ask", "tool_calls": [bash(ASKED)]}, {"text": "worked"}],
    }, default="ask", allow=["spawn_teammate", "send_message", "wait_agent"], delegate="lead",
        ask_timeout_ms=60_000)  # fmt: skip
    done = run.run()
    assert done.returncode == 0, done.stderr[-2000:]
    assert run.lines() == 1
    [requested] = run.records("permission/requested")
    assert (requested["member"], requested["route"]) == ("worker", "lead")
    [answered] = run.records("permission/answered")
    assert (answered["decision"], answered["by"], answered["reason"]) == ("allow", "lead", "go ahead")


def test_the_user_overrides_a_delegated_ask(tmp_path: Path) -> None:
    run = Run(tmp_path, {
        "lead": [
            {"text": "spawn", "tool_calls": [SPAWN]},
            {"text": "wait", "tool_calls": [{"name": "wait_agent", "arguments": {"timeout_ms": 30000}}]},
            {"when": "the user said no", "text": "answer", "tool_calls": [{"name": "send_message", "arguments": {
                "target": "worker", "permission": "ask-1", "answer": "allow", "message": "late"}}]},
            {"text": "done"},
        ],
        "worker": [
            {"text": "ask", "tool_calls": [bash(ASKED)]},
            {"when": "denied by user", "text": "told", "tool_calls": [{"name": "send_message", "arguments": {
                "target": "lead", "message": "the user said no"}}]},
            {"text": "stopped"},
        ],
    }, default="ask", allow=["spawn_teammate", "send_message", "wait_agent"], delegate="lead",
        ask_timeout_ms=3_600_000)  # fmt: skip
    run.kill_when(run.start(), lambda: run.records("permission/requested"))
    assert run.dsh("team", "permit", "ask-1", "deny", "--reason", "not on my machine").returncode == 0
    done = run.resume()
    assert done.returncode == 0, done.stderr[-2000:]
    assert run.lines() == 0
    [answered] = run.records("permission/answered")
    assert (answered["decision"], answered["by"]) == ("deny", "user")
    codes = [(e["data"].get("error") or {}).get("code") for e in run.lead_log() if e["type"] == "tool/result"]
    assert "PERMISSION_ALREADY_ANSWERED" in codes  # the Lead came second: a typed error, nothing recorded
    assert "denied by user: not on my machine" in run.transcript("worker")
