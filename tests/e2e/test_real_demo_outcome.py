"""``make real-demo`` judges its own run: delivered to the Lead is success, anything else fails loudly with why.

The judge (``examples/run_real_demo.outcome``) reads a real run's data directory through
``dsh team show --json`` and ``dsh log --json``; here the runs are real ``dsh run``
subprocesses on the ``agent-teams`` profile with a scripted model, so each outcome the
tiny model can produce (a delivered message, a teammate naming a tool as its target,
no teammate at all) is produced for real.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))

from run_real_demo import outcome  # noqa: E402

SPAWN = {"name": "spawn_teammate", "arguments": {"name": "poet", "description": "writes a poem", "prompt": "a poem"}}


def run(tmp_path: Path, script: dict[str, Any]) -> tuple[Path, int]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "script.json").write_text(json.dumps(script))
    data = tmp_path / "data"
    done = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "run", "--profile", "agent-teams",
                           "--model", f"scripted:{tmp_path / 'script.json'}", "--data-dir", str(data),
                           "--workspace", str(tmp_path), "write a poem"], capture_output=True, text=True, timeout=120)
    return data, done.returncode


def poet_sends(target: str) -> dict[str, Any]:
    return {"lead": [{"tool_calls": [SPAWN]}, {"text": "waiting"}],
            "poet": [{"tool_calls": [{"name": "send_message", "arguments": {"target": target, "message": "Waves."}}]},
                     {"text": "sent"}]}


@pytest.mark.slow
class TestOutcome:
    def test_a_delivered_message_is_success_and_quoted(self, tmp_path: Path) -> None:
        data, code = run(tmp_path, poet_sends("lead"))
        ok, line = outcome(data, code)
        assert ok, line
        assert line.startswith("poet's message reached the Lead (") and line.endswith("): 'Waves.'")

    def test_a_tool_named_as_the_target_fails_with_the_teams_error(self, tmp_path: Path) -> None:
        data, code = run(tmp_path, poet_sends("send_message"))
        ok, line = outcome(data, code)
        assert not ok
        assert line.startswith('poet\'s send_message {"target":"send_message","message":"Waves."} failed: '
                               "TEAM_MEMBER_NOT_FOUND: ")

    def test_no_teammate_and_no_message_are_failures(self, tmp_path: Path) -> None:
        data, code = run(tmp_path / "alone", {"lead": [{"text": "I will do it myself."}]})
        assert outcome(data, code) == (False, "the Lead created no teammate")
        data, code = run(tmp_path / "silent", {"lead": [{"tool_calls": [SPAWN]}, {"text": "ok"}],
                                               "poet": [{"text": "a poem, kept to myself"}]})
        assert outcome(data, code) == (False, "the teammate never sent the Lead a message")
        assert outcome(data, 1) == (False, "the run failed before the teammate's message reached the Lead "
                                           "(see the line above)")
