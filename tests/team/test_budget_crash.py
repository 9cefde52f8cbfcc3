"""A budget through the real CLI: reached, SIGKILL, ``dsh resume`` (still refused), raise the limit, resume.

:mod:`crash_driver` runs ``dsh run`` with a profile that sets a 150-token member
limit and kills itself right after the group commit that made the ``team/budget``
record durable. The scripted teammate reports 100 tokens per model call, so its
second call reaches the limit. Then the real ``dsh resume``: first with the same
profile (nothing new may be charged, recorded or told), then with the limit
raised (the held work is done, nothing twice).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_team.core.fold import replay
from dsh_team.cost import replay_costs
from dsh_team.cost.records import TEAM_BUDGET
from host_spec.events import EventType
from host_spec.host.store.jsonl import JsonlStore

from roster_kit import history_ids, of_type, pending_ids
from test_team_crash import DRIVER, DSH

pytestmark = pytest.mark.slow


def usage(tokens: int) -> dict[str, int]:
    return {"input_tokens": tokens, "output_tokens": 0}


SCRIPT = {
    "lead": [
        {"text": "spawning", "tool_calls": [
            {"name": "spawn_teammate", "arguments": {"name": "worker", "description": "worker", "prompt": "start"}},
            {"name": "send_message", "arguments": {"target": "worker", "message": "first job"}},
        ]},
        {"when": "reached its tokens limit", "text": "more work", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "worker", "message": "second job"}},
        ]},
        {"text": "waiting for the worker"},
    ],
    "worker": [
        {"text": "started", "usage": usage(100)},
        {"text": "first done", "usage": usage(100)},
        {"text": "second done", "usage": usage(100)},
    ],
}  # fmt: skip


def profile(tmp_path: Path, tokens: int) -> Path:
    path = tmp_path / f"budget-{tokens}.toml"
    path.write_text(f'extends = "agent-teams"\n\n[plugins.dsh-team.budget]\nmember_tokens = {tokens}\n')
    return path


def dsh_resume(tmp_path: Path, env: dict[str, str], tokens: int) -> None:
    resumed = subprocess.run(
        [*DSH, "resume", "--profile", str(profile(tmp_path, tokens)), "--model", f"scripted:{tmp_path / 'script.json'}",
         "--data-dir", str(tmp_path / "data")],
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    errors = re.findall(rb"^dsh: [A-Z_]+: .*$", resumed.stderr, re.MULTILINE)
    assert resumed.returncode in (0, 1) and not errors, resumed.stderr.decode()[-2000:]


def logs(tmp_path: Path) -> tuple[list[Any], str, list[Any]]:
    """``(Lead events, worker id, worker events)`` read from the files."""
    store = JsonlStore(tmp_path / "data")
    lead = store.read("session-1")[1]
    state = replay(lead, "session-1")
    worker = state.members.by_name("worker")
    assert worker is not None
    return lead, worker.id, store.read(worker.id)[1]


def told(events: list[Any]) -> list[str]:
    return [i for i in history_ids(events) + pending_ids(events) if i.startswith("budget-")]


@pytest.mark.timeout_s(400)
def test_budget_survives_sigkill_and_is_lifted_by_a_higher_limit(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(DRIVER.parent), os.environ.get("PYTHONPATH")]))}
    crashed = subprocess.run(
        [sys.executable, str(DRIVER), str(tmp_path / "data"), str(tmp_path / "script.json"), "after-budget", "go",
         str(profile(tmp_path, 150))],
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr.decode()[-2000:]
    lead, worker_id, worker = logs(tmp_path)
    assert [b["used"] for b in of_type(lead, TEAM_BUDGET)] == [200]

    dsh_resume(tmp_path, env, 150)  # the same limit: still refused, nothing recorded or told twice
    lead, _, worker = logs(tmp_path)
    replies = [r["usage"]["input_tokens"] for r in of_type(worker, EventType.ASSISTANT_MESSAGE) if r.get("usage")]
    assert replies == [100, 100]
    assert len(of_type(lead, TEAM_BUDGET)) == 1 and len(told(lead)) == 1
    second = [m for m in of_type(lead, "team/message/queued") if m["message"]["content"][0]["text"] == "second job"]
    assert len(second) == 1 and second[0]["message"]["id"] in pending_ids(worker)  # held, not lost

    dsh_resume(tmp_path, env, 1000)  # raised: the held job is done once
    lead, _, worker = logs(tmp_path)
    replies = [r["usage"]["input_tokens"] for r in of_type(worker, EventType.ASSISTANT_MESSAGE) if r.get("usage")]
    assert replies == [100, 100, 100]
    assert history_ids(worker).count(second[0]["message"]["id"]) == 1
    assert len(of_type(lead, TEAM_BUDGET)) == 1 and len(told(lead)) == 1
    state = replay(lead, "session-1")
    assert not state.mail.pending
    ledger = replay_costs(lead, "session-1")
    assert ledger.member(worker_id).tokens == 300 and ledger.failure is None
