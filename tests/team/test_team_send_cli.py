"""``dsh team send`` and ``dsh team transcript`` through the real CLI, SIGKILL and ``dsh resume``.

A real ``dsh run`` leaves a Team asleep on disk; ``dsh team send`` queues the user's
message in its Lead log; a resume is SIGKILLed right after the teammate's history
durably holds it; the next ``dsh resume`` finishes: the message was recorded once,
delivered once, answered once. A run live in another process refuses the send.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_team.core.fold import replay
from dsh_team.core.records import TEAM_MESSAGE_DELIVERED, TEAM_MESSAGE_QUEUED
from dsh_team.mail.framing import recorded_team_message
from host_spec.events import EventType
from host_spec.host.store.jsonl import JsonlStore

from roster_kit import of_type
from test_team_crash import DRIVER, DSH

pytestmark = pytest.mark.slow

SCRIPT = {
    "lead": [
        {"text": "spawning", "tool_calls": [
            {"name": "spawn_teammate", "arguments": {"name": "worker", "description": "worker", "prompt": "start"}},
        ]},
        {"text": "spawned"},
    ],
    "worker": [
        {"text": "started"},
        {"when": "from the user", "text": "on it"},
    ],
}  # fmt: skip


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def dsh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*DSH, *args], env=env(), capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture
def stopped(tmp_path: Path) -> Path:
    """A finished run: the Lead and a teammate asleep on disk."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    dsh("run", "--profile", "agent-teams", "--model", f"scripted:{script}", "--data-dir", str(tmp_path / "data"), "go")
    return tmp_path


def team(tmp_path: Path) -> tuple[list[Any], str, list[Any]]:
    store = JsonlStore(tmp_path / "data")
    lead = store.read("session-1")[1]
    worker = replay(lead, "session-1").members.by_name("worker")
    assert worker is not None
    return lead, worker.id, store.read(worker.id)[1]


class TestSend:
    def test_a_send_to_a_stopped_run_is_delivered_once_across_a_sigkill(self, stopped: Path) -> None:
        data = str(stopped / "data")
        sent = dsh("team", "send", "--data-dir", data, "worker", "please check the docs")
        message_id = sent.stdout.split()[1]
        assert sent.stdout.startswith("queued team-message-") and "for worker" in sent.stdout
        lead, worker_id, worker = team(stopped)
        queued = of_type(lead, TEAM_MESSAGE_QUEUED)
        assert queued[-1]["message"]["id"] == message_id and queued[-1]["message"]["sender_id"] == "user"
        assert replay(lead, "session-1").mail.pending_count(worker_id) == 1  # durable before any resume
        killed = subprocess.run(
            [sys.executable, str(DRIVER), data, str(stopped / "script.json"), "after-user-recorded", "RESUME:session-1"],
            env=env(), capture_output=True, timeout=120,
        )  # fmt: skip
        assert killed.returncode == -9, killed.stderr.decode()[-2000:]
        dsh("resume", "--model", f"scripted:{stopped / 'script.json'}", "--data-dir", data)
        lead, _, worker = team(stopped)
        recorded = [recorded_team_message(e) for e in worker if e.type == EventType.USER_MESSAGE]
        assert recorded.count(("session-1", message_id)) == 1
        answers = [e for e in of_type(worker, EventType.ASSISTANT_MESSAGE) if "on it" in json.dumps(e)]
        assert len(answers) == 1
        assert [q["message"]["id"] for q in of_type(lead, TEAM_MESSAGE_QUEUED)].count(message_id) == 1
        assert [d["message_id"] for d in of_type(lead, TEAM_MESSAGE_DELIVERED)].count(message_id) == 1
        state = replay(lead, "session-1")
        assert state.failure is None and state.mail.pending_count(worker_id) == 0
        shown = dsh("team", "transcript", "--data-dir", data, "worker").stdout.splitlines()
        assert shown[0] == "user: <system-reminder>" and "assistant: started" in shown
        assert f"user: Message {message_id} from the user: please check the docs" in shown
        assert shown.count("assistant: on it") == 1
        lead_lines = dsh("team", "transcript", "--data-dir", data, "lead").stdout.splitlines()
        assert lead_lines[0] == "user: go" and any(line.startswith("tool call spawn_teammate") for line in lead_lines)

    def test_bad_requests_write_nothing(self, stopped: Path) -> None:
        data = str(stopped / "data")
        before = (stopped / "data").joinpath("sessions").stat().st_mtime_ns
        lead_before = len(team(stopped)[0])
        for member, text, code in (("nobody", "hi", "TEAM_MEMBER_NOT_FOUND"), ("worker", "  ", "TEAM_INVALID_ARGUMENT"),
                                   ("worker", "x" * 70_000, "TEAM_MESSAGE_TOO_LARGE")):
            refused = dsh("team", "send", "--data-dir", data, member, text, check=False)
            assert refused.returncode == 2 and f"dsh: {code}:" in refused.stderr
        assert len(team(stopped)[0]) == lead_before
        missing = dsh("team", "transcript", "--data-dir", data, "nobody", check=False)
        assert missing.returncode == 2 and "TEAM_MEMBER_NOT_FOUND" in missing.stderr
        assert before <= (stopped / "data").joinpath("sessions").stat().st_mtime_ns

    def test_a_run_live_in_another_process_refuses_with_a_hint(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        holder = subprocess.Popen([sys.executable, str(Path(__file__).parents[1] / "hold_team.py"), str(data)],
                                  env=env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None
            while not (line := holder.stdout.readline()).startswith("ready"):  # log lines come first
                assert line, "the holder exited"
            refused = dsh("team", "send", "--data-dir", str(data), "--team", "lead", "worker", "hi", check=False)
            assert refused.returncode == 2 and "dsh: TEAM_RUN_LIVE:" in refused.stderr
            assert "web panel" in refused.stderr
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(60)
        lead = JsonlStore(data).read("lead")[1]
        assert all(q["message"]["sender_id"] != "user" for q in of_type(lead, TEAM_MESSAGE_QUEUED))


SHUTDOWN_SCRIPT = {
    "lead": [
        {"text": "spawning", "tool_calls": [
            {"name": "spawn_teammate", "arguments": {"name": "worker", "description": "worker", "prompt": "start"}},
        ]},
        {"text": "asking", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "worker", "message": "done", "shutdown": "request"}},
        ]},
        {"text": "noted"},
    ],
    "worker": [
        {"text": "started"},
        {"when": "Shutdown request", "text": "wrapping up", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "lead", "message": "bye", "shutdown": "approve"}},
        ]},
        {"text": "bye"},
    ],
}  # fmt: skip


class TestSameAdmissionAsTheLiveService:
    def test_a_member_that_shut_down_is_refused_and_nothing_is_written(self, tmp_path: Path) -> None:
        # The live service refuses mail to a member gone for good; `dsh team send` used to accept it
        # and the message then stayed queued forever, through any number of resumes.
        script = tmp_path / "script.json"
        script.write_text(json.dumps(SHUTDOWN_SCRIPT))
        data = str(tmp_path / "data")
        dsh("run", "--profile", "agent-teams", "--model", f"scripted:{script}", "--data-dir", data, "go")
        lead = JsonlStore(tmp_path / "data").read("session-1")[1]
        assert [r["phase"] for r in of_type(lead, "team/shutdown")] == ["requested", "approved", "released"]
        refused = dsh("team", "send", "--data-dir", data, "worker", "one more thing", check=False)
        assert refused.returncode == 2 and "dsh: TEAM_MEMBER_NOT_FOUND:" in refused.stderr
        assert "shut down" in refused.stderr
        assert len(JsonlStore(tmp_path / "data").read("session-1")[1]) == len(lead)

    def test_the_runs_own_profile_limits_apply(self, tmp_path: Path) -> None:
        script = tmp_path / "script.json"
        script.write_text(json.dumps(SCRIPT))
        profile = tmp_path / "tight.toml"
        profile.write_text('extends = "agent-teams"\n\n[plugins.dsh-team]\nmax_pending_messages_per_member = 1\n'
                           "max_message_bytes = 2048\n")
        data = str(tmp_path / "data")
        dsh("run", "--profile", str(profile), "--model", f"scripted:{script}", "--data-dir", data, "go")
        too_large = dsh("team", "send", "--data-dir", data, "worker", "x" * 3000, check=False)
        assert too_large.returncode == 2 and "dsh: TEAM_MESSAGE_TOO_LARGE:" in too_large.stderr  # default is 64 KiB
        dsh("team", "send", "--data-dir", data, "worker", "first")
        full = dsh("team", "send", "--data-dir", data, "worker", "second", check=False)
        assert full.returncode == 2 and "dsh: TEAM_MAILBOX_FULL:" in full.stderr  # the default allows 64
        lead = JsonlStore(tmp_path / "data").read("session-1")[1]
        assert [q["message"]["sender_id"] for q in of_type(lead, TEAM_MESSAGE_QUEUED)].count("user") == 1
