"""Permission rules and durable asks through the real CLI: real runs, real logs, SIGKILL of the real process.

Each case writes a profile (``agent-teams`` plus a ``[permissions]`` table) and a
script, runs ``dsh`` (``main`` in this process, or a subprocess where it is to be
killed), and reads the Lead log on disk. The
command under an ask appends a line to ``out.txt`` in the workspace, so "ran at
most once" is a line count. A case that must stop while an ask is open waits
for the ``permission/requested`` record to be durable, then kills the process
with SIGKILL.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from host_spec.host.cli.main import main

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
        """``dsh ARGS --data-dir D`` through the CLI's ``main`` in this process (its output captured)."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*args, "--data-dir", str(self.data)])
        return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())

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
    assert "[lead] permission needed for call lead-2.1 (rule bash(echo line*)): answer with /permit" in done.stdout
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
    assert "permission ask-1 allowed by user" in run.transcript("lead")
    assert run.resume().returncode == 0 and run.lines() == 1  # a further resume runs nothing again


def test_an_open_ask_survives_sigkill_and_resume(tmp_path: Path) -> None:
    run = Run(tmp_path, {"lead": [{"text": "ask", "tool_calls": [bash(ASKED)]}, {"text": "done"}]},
              default="ask", ask_timeout_ms=3_600_000)  # fmt: skip
    run.kill_when(run.start(), lambda: run.records("permission/requested"))
    resumed = run.start("resume", *run.model)

    def waiting_again() -> bool:
        """The resumed Lead was told the host restarted and waits on the same ask: the live run refuses a permit."""
        if "has been restarted" not in json.dumps(run.lead_log()):
            return False
        live = run.dsh("team", "permit", "ask-1", "allow")
        assert live.returncode != 0 and "TEAM_RUN_LIVE" in live.stderr, live.stderr
        return True

    run.kill_when(resumed, waiting_again)
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


async def _corrupt(data: Path) -> None:
    """Append another Team's answer (ignored) and a second answer of ask-1 (the fold refuses it)."""
    from dsh_team.permissions import AnsweredRecord
    from host_spec.host.store.jsonl import JsonlStore
    from host_spec.host.store.session import NullObserver
    from host_spec.host.store.sessions import SessionStore

    sessions = SessionStore(JsonlStore(data), NullObserver())
    stored = sessions.resume("session-1")
    stored.append("permission/answered", AnsweredRecord(version=1, team_id="other", ask_id="ask-1", decision="deny",
                                                        by="user"))  # fmt: skip
    stored.append("permission/answered", AnsweredRecord(version=1, team_id="session-1", ask_id="ask-1",
                                                        decision="deny", by="user"))  # fmt: skip
    await sessions.dispose(stored)


def trace_events(run: Run) -> list[dict[str, Any]]:
    out = run.tmp / "t.json"
    assert run.dsh("trace", "export", "--out", str(out), "--content").returncode == 0
    document = json.loads(out.read_text())
    return [ev for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
            for ev in span.get("events", []) if ev["name"].startswith("team.permission")]  # fmt: skip


def test_asks_in_the_trace_and_a_log_whose_asks_do_not_fold(tmp_path: Path) -> None:
    import asyncio

    run = Run(tmp_path, {"lead": [{"text": "ask", "tool_calls": [bash(ASKED)]}, {"text": "done"}]},
              default="ask", ask_timeout_ms=3_600_000)  # fmt: skip
    run.kill_when(run.start(), lambda: run.records("permission/requested"))
    show = run.dsh("team", "show")
    assert "ask-1 lead: bash" in show.stdout and "OPEN -- answer with `dsh team permit ask-1 allow|deny`" in show.stdout
    assert run.dsh("team", "permit", "ask-1", "allow", "--always").returncode == 0
    assert run.resume().returncode == 0 and run.lines() == 1
    show = run.dsh("team", "show")
    assert "(rule default, asks user): allow by user" in show.stdout  # a compound command's always is this call only
    events = trace_events(run)
    assert sorted(ev["name"] for ev in events) == ["team.permission.answered", "team.permission.requested"]
    [requested] = [ev for ev in events if ev["name"] == "team.permission.requested"]
    attributes = {a["key"]: a["value"] for a in requested["attributes"]}
    assert attributes["dsh.team.permission.id"] == {"stringValue": "ask-1"}
    assert "echo line" in attributes["dsh.team.permission.arguments"]["stringValue"]
    asyncio.run(_corrupt(run.data))
    refused = run.dsh("team", "permit", "ask-1", "deny")
    assert refused.returncode != 0 and "TEAM_STREAM_FAILED" in refused.stderr
    assert "FAILURE (permissions): seq" in run.dsh("team", "show").stdout
    names = sorted(ev["name"] for ev in trace_events(run))
    assert names == ["team.permission.answered", "team.permission.requested", "team.permissions.failed"]
