"""The web panel's document carries the same worktree section as ``dsh team show --json``.

A worktree run (one member merged, one with work left) is served read-only as
``dsh team serve`` serves it (with the CLI's git, for commits ahead); the
document's ``worktrees`` equals the ``--json`` section, also at a past position.
A live panel asks the running host's git.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from dsh_team.web.app import build_app
from dsh_team.web.followed import FollowedRun
from dsh_team.web.sources import LiveRun, StoredRun
from dsh_team.web.stream import Feed
from host_spec.host.app import Host
from host_spec.host.cli.extensions import StoreReader
from host_spec.host.cli.main import main
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.worktrees.git import GitWorktrees
from host_spec.worktrees import Worktrees
from wt_kit import make_repo, records, run_team, write_profile, write_script

pytestmark = pytest.mark.timeout_s(120)

TOKEN = "t" * 32
AUTH = {"X-Dsh-Token": TOKEN}


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


SCRIPT = {
    "lead": [{"text": "plan", "tool_calls": [
        _call("team_task_create", subject="ann's", description="d"),
        _call("spawn_teammate", name="ann", description="a", prompt="task-1"),
        _call("spawn_teammate", name="ben", description="b", prompt="nothing to complete")]}, {"text": "waiting"}],
    "ann": [{"text": "work", "tool_calls": [
        _call("team_task_update", task_id="task-1", expected_revision=1, action="claim"),
        _call("write_file", path="ann.txt", content="a\n"),
        _call("team_task_update", task_id="task-1", expected_revision=2, action="complete")]}, {"text": "done"}],
    "ben": [{"text": "work", "tool_calls": [_call("write_file", path="ben.txt", content="b\n")]}, {"text": "done"}],
}  # fmt: skip


def test_the_panel_shows_branches_ahead_and_merges_like_team_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "repo")
    data = tmp_path / "data"
    lead_id = asyncio.run(run_team(data, repo, write_script(tmp_path, SCRIPT), write_profile(tmp_path)))
    capsys.readouterr()
    assert main(["team", "show", "--data-dir", str(data), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["worktrees"]
    assert [(w["member"], w["exists"]) for w in shown["worktrees"]] == [("ann", False), ("ben", True)]
    assert [(m["task_id"], m["phase"], m["fast_forward"]) for m in shown["merges"]] == [("task-1", "done", True)]
    reader = StoreReader(JsonlStore(data))
    client = TestClient(build_app(Feed(StoredRun(reader.read(lead_id, salvage=True), reader, GitWorktrees())), TOKEN))
    doc = client.get("/api/team", headers=AUTH).json()
    assert doc["worktrees"] == shown
    intent_seq = next(e.seq for e in JsonlStore(data).read(lead_id)[1] if e.type == "team/merge")
    past = client.get(f"/api/team?at={intent_seq}", headers=AUTH).json()["worktrees"]
    assert [m["phase"] for m in past["merges"]] == ["intent"]  # the merge as it was then
    assert len(records(data, lead_id, "team/merge")) == 2
    bare = TestClient(build_app(Feed(StoredRun(reader.read(lead_id, salvage=True), reader)), TOKEN))
    assert bare.get("/api/team", headers=AUTH).json()["worktrees"]["remaining"] is None  # no git: the log's facts


async def test_a_live_panel_asks_the_running_hosts_git(tmp_path: Path) -> None:
    host = await Host.open(tmp_path / "data", str(write_profile(tmp_path)), f"scripted:{write_script(tmp_path, {})}")
    try:
        found = LiveRun(host, lambda: None).worktrees
        assert isinstance(found, Worktrees) and found is host.find_service(Worktrees)
    finally:
        await host.close()
    assert FollowedRun.worktrees is None
