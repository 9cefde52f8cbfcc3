"""Crash e2e: SIGKILL the demo at points spread over the run, ``dsh resume``, compare with a clean run.

Each case runs ``dsh run`` on the demo in a subprocess with the ``e2e-probe``
observer, which freezes the process once a chosen event is durable (``pause_at``:
the k-th Team event of a type in the Lead's log, or a child's first flush). The
test waits for the freeze, kills the process with SIGKILL, and checks that the
Lead log on disk is exactly at the intended point (e.g. a ``team/message/queued``
whose ``team/message/delivered`` is not written yet). ``dsh resume`` (same
profile and script) must then finish the run: every accepted message lands in
its target's history exactly once, nothing stays queued, and the final board and
Team events equal those of an uncrashed run.

The points are the ones a *scripted* Lead can finish from. A crash after a
teammate's ``provisioning`` record but before its child log holds the prompt
ends, by design, with that member ``failed`` and its name reserved (the script
never retries); the roster's own crash tests cover that outcome.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from e2e_demo_kit import (
    REPO,
    Stored,
    board,
    dsh,
    dsh_argv,
    environment,
    probe_profile,
    resume_args,
    run_args,
    team_event_set,
    team_show,
)

pytestmark = pytest.mark.slow

WATCH_TIMEOUT_S = 30.0
SUMMARY = "Summary: builder wrote src/greet.py"


@attrs.frozen
class CrashPoint:
    """Where to kill: once the ``nth`` ``type`` event of the Lead log is durable.

    ``type`` ``child-flush`` means the first durable flush of the ``nth`` child that
    holds its initial prompt: the Lead has written ``provisioning`` but not ``active``.
    """

    type: str
    nth: int
    why: str

    @property
    def pause_at(self) -> str:
        return f"{self.type}#{self.nth}"

    def check(self, lead_log: list[dict[str, Any]]) -> None:
        """Assert the Lead log on disk is frozen exactly at this point."""
        kinds = [e["type"] for e in lead_log]
        if self.type == "child-flush":
            phases = [e["data"]["member"]["phase"] for e in lead_log if e["type"] == "team/member"]
            assert phases.count("provisioning") == self.nth and phases.count("active") == self.nth - 1, self.why
            return
        assert kinds.count(self.type) == self.nth, self.why
        if self.type == "team/message/queued":
            last = [e for e in lead_log if e["type"] == "team/message/queued"][-1]["data"]["message"]["id"]
            assert last not in {e["data"]["message_id"] for e in lead_log if e["type"] == "team/message/delivered"}


#: Spread over the run: planning, both creations, claiming, each kind of mail, the end.
CRASH_POINTS = [
    CrashPoint("team/task", 2, "Lead planned both tasks; its tool step is still open"),
    CrashPoint("child-flush", 1, "builder's prompt is durable; the Lead has not recorded it active"),
    CrashPoint("team/member", 2, "builder is active; the Lead has not seen the spawn result"),
    CrashPoint("team/task", 3, "builder claimed task-1 and has not seen the result"),
    CrashPoint("team/message/queued", 1, "builder -> lead queued, not delivered"),
    CrashPoint("child-flush", 2, "reviewer (fork) prompt durable; the Lead has not recorded it active"),
    CrashPoint("team/message/queued", 3, "reviewer -> builder queued while builder sleeps on disk"),
    CrashPoint("team/message/delivered", 4, "the last message was just acknowledged"),
]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uncrashed run: its board and Team events, normalized."""
    tmp = tmp_path_factory.mktemp("clean")
    env = environment(tmp)
    data = tmp / "data"
    result = dsh(env, *run_args(data))
    assert result.returncode == 0, result.stderr
    stored = Stored(data)
    return {"board": board(team_show(env, data), stored.ids()), "events": team_event_set(stored)}


def _lead_log(data: Path) -> list[dict[str, Any]]:
    """The Lead's complete lines on disk right now (a torn last line is skipped)."""
    sessions = data / "sessions"
    for path in sorted(sessions.glob("*/session.jsonl")) if sessions.exists() else ():
        lines = path.read_bytes().split(b"\n")
        header = json.loads(lines[0])
        if header.get("parent_session") is None:
            return [json.loads(line) for line in lines[1:-1]]
    return []


def _crash(tmp: Path, env: dict[str, str], data: Path, point: CrashPoint) -> list[dict[str, Any]]:
    """Run the demo until ``point`` is durable in the Lead log, then SIGKILL it; returns that log."""
    marker = tmp / "paused"
    profile = probe_profile(tmp, "crash", pause_at=point.pause_at, pause_marker=str(marker), pause_s=120)
    process = subprocess.Popen(
        dsh_argv(*run_args(data, profile)), env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + WATCH_TIMEOUT_S
        while True:
            if marker.exists():
                break
            assert process.poll() is None, f"the run ended before {point.pause_at}: {process.stderr.read()!r}"
            assert time.monotonic() < deadline, f"{point.pause_at} never became durable"
            time.sleep(0.005)
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=10) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()
    return _lead_log(data)


@pytest.mark.parametrize("point", CRASH_POINTS, ids=lambda p: p.pause_at)
class TestCrashResume:
    def test_resume_finishes_the_run_exactly_once(
        self, point: CrashPoint, clean: dict[str, Any], tmp_path: Path
    ) -> None:
        """After SIGKILL at the point and ``dsh resume``, mail is delivered once and the board matches a clean run."""
        env = environment(tmp_path)
        data = tmp_path / "data"
        point.check(_crash(tmp_path, env, data, point))

        result = dsh(env, *resume_args(data))
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr

        stored = Stored(data)
        show = team_show(env, data)
        assert show["failure"] is None
        assert show["pending_mail"] == []
        assert board(show, stored.ids()) == clean["board"]
        assert team_event_set(stored) == clean["events"]

        queued = {e.value()["message"]["id"]: e.value()["message"]["target_id"]
                  for e in stored.team_events() if e.type == "team/message/queued"}
        assert len(queued) == 4
        for message_id, target in queued.items():
            assert stored.messages_in(target)[message_id] == 1, f"{message_id} not in {target} exactly once"
        lead_texts = [e for e in stored.lead_events if e.type == "assistant/message"
                      and any(SUMMARY in (b.get("text") or "") for b in e.value()["content"])]
        assert len(lead_texts) == 1, "the Lead summarised exactly once"
