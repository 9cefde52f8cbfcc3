"""End to end through the ``dsh`` CLI: a scripted Lead and teammate use every Team tool.

Runs ``python -m host_spec.host.cli.main run`` in a subprocess with a keyless script,
then reads the stored logs. Under ``--profile headless`` the same script finds no
Team tool.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_team_tools.catalog import TOOL_NAMES
from host_spec.host.store.jsonl import JsonlStore

SCRIPT = {
    "lead": [
        {"tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "reviewer", "description": "Reviews the parser", "prompt": "Claim task-1, finish it, report"}},
            {"name": "team_task_create", "arguments": {"subject": "Review", "description": "Review the parser",
                                                       "write_scopes": ["src/parser"]}}]},
        {"tool_calls": [{"name": "list_agents", "arguments": {}},
                        {"name": "send_message", "arguments": {"target": "reviewer", "message": "task-1 is yours"}}]},
        {"when": "review done", "tool_calls": [{"name": "team_task_get", "arguments": {"task_id": "task-1"}},
                                               {"name": "interrupt_agent", "arguments": {"target": "reviewer"}}]},
        {"tool_calls": [{"name": "wait_agent", "arguments": {"timeout_ms": 10000}}]},
        {"text": "The review is complete."},
    ],
    "reviewer": [
        {"when": "task-1 is yours", "tool_calls": [{"name": "team_task_list", "arguments": {"owner": "unowned"}}]},
        {"tool_calls": [{"name": "team_task_update", "arguments": {
            "task_id": "task-1", "expected_revision": 1, "action": "claim"}}]},
        {"tool_calls": [{"name": "team_task_update", "arguments": {
            "task_id": "task-1", "expected_revision": 2, "action": "complete"}},
            {"name": "send_message", "arguments": {"target": "lead", "message": "review done"}}]},
        {"text": "Reported to the lead."},
    ],
}


def dsh(data_dir: Path, script: Path, profile: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "host_spec.host.cli.main", "run", "--data-dir", str(data_dir), "--profile", profile,
         "--model", f"scripted:{script}", "Use an agent team: have a reviewer review the parser."],
        capture_output=True, text=True, timeout=120, check=False)


def results(store: JsonlStore) -> list[dict[str, Any]]:
    found = []
    for session_id in store.list_ids():
        _, events = store.read(session_id)
        found += [event.value() for event in events if event.type == "tool/result"]
    return found


@pytest.mark.slow
class TestEndToEnd:
    def test_agent_teams_profile_uses_every_tool(self, tmp_path: Path) -> None:
        """Under agent-teams the Lead and its teammate call all nine tools, each succeeding once at least."""
        script = tmp_path / "script.json"
        script.write_text(json.dumps(SCRIPT))
        done = dsh(tmp_path / "data", script, "agent-teams")
        assert done.returncode == 0, done.stderr
        store = JsonlStore(tmp_path / "data")
        ok = {r["name"] for r in results(store) if not r.get("is_error")}
        assert ok >= set(TOOL_NAMES)
        assert len(store.list_ids()) == 2

    def test_headless_profile_has_no_team_tools(self, tmp_path: Path) -> None:
        """Under headless every Team-only tool call is an unknown tool."""
        script = tmp_path / "script.json"
        script.write_text(json.dumps({"lead": SCRIPT["lead"][:1] + [{"text": "no team here"}]}))
        done = dsh(tmp_path / "data", script, "headless")
        assert done.returncode == 0, done.stderr
        errors = {r["name"]: r["error"]["code"] for r in results(JsonlStore(tmp_path / "data")) if r.get("is_error")}
        assert errors == {"spawn_teammate": "UNKNOWN_TOOL", "team_task_create": "UNKNOWN_TOOL"}
