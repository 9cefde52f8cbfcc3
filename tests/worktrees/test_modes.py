"""Choosing the workspace mode: the profile's ``workspace_mode``, a role's, and their validation.

A role with ``workspace_mode = "worktree"`` gives its member a worktree in a Team
whose profile stays ``shared``; a role saying ``shared`` keeps its member in the
Lead's checkout in a ``worktree`` Team. Bad values fail loudly naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_team.config import TeamConfig
from dsh_team.core.fold import replay
from dsh_team.errors import TeamConfigError, TeamError
from dsh_team.roster.roles import find_role
from host_spec.host.store.jsonl import JsonlStore
from wt_kit import lead_events, make_repo, records, run_team, write_profile, write_script

pytestmark = pytest.mark.timeout_s(120)


def test_the_default_is_shared_and_a_bad_mode_names_the_field() -> None:
    assert TeamConfig().workspace_mode == "shared" and TeamConfig().keep_worktrees is False
    with pytest.raises(TeamConfigError) as caught:
        TeamConfig.from_mapping({"workspace_mode": "isolated"})
    assert caught.value.path == "workspace_mode" and '"shared" or "worktree"' in caught.value.message
    with pytest.raises(TeamConfigError) as caught:
        TeamConfig.from_mapping({"keep_worktrees": "yes"})
    assert caught.value.path == "keep_worktrees"


def test_a_role_with_a_bad_mode_is_invalid() -> None:
    with pytest.raises(TeamError) as caught:
        find_role("odd", cwd=None, table={"odd": {"workspace_mode": "elsewhere"}})
    assert caught.value.code == "TEAM_ROLE_INVALID" and "workspace_mode" in caught.value.message
    assert find_role("iso", cwd=None, table={"iso": {"workspace_mode": "worktree"}}).workspace_mode == "worktree"


def _spawn(name: str, role: str) -> dict[str, Any]:
    return {"name": "spawn_teammate", "arguments": {"name": name, "description": name, "prompt": "p", "role": role}}


SCRIPT = {
    "lead": [{"text": "spawn", "tool_calls": [_spawn("iso", "isolated"), _spawn("sha", "sharing")]}, {"text": "done"}],
    "iso": [{"text": "write", "tool_calls": [{"name": "write_file", "arguments": {"path": "iso.txt", "content": "i"}}]}],
    "sha": [{"text": "write", "tool_calls": [{"name": "write_file", "arguments": {"path": "sha.txt", "content": "s"}}]}],
}
ROLES = """
[plugins.dsh-team.roles.isolated]
workspace_mode = "worktree"

[plugins.dsh-team.roles.sharing]
workspace_mode = "shared"
"""


@pytest.mark.parametrize("team_mode", ["shared", "worktree"])
async def test_a_roles_mode_wins_over_the_teams(tmp_path: Path, team_mode: str) -> None:
    repo = make_repo(tmp_path / "repo")
    data = tmp_path / "data"
    lead_id = await run_team(data, repo, write_script(tmp_path, SCRIPT), write_profile(tmp_path, team_mode, ROLES))
    state = replay(lead_events(data, lead_id), lead_id)
    assert sorted((m.name, m.phase) for m in state.members.listed()) == [("iso", "active"), ("sha", "active")]
    assert [r["member"] for r in records(data, lead_id, "team/worktree")] == ["iso"]
    ids = {m.name: m.id for m in state.members.listed()}
    store = JsonlStore(data)
    assert store.read(ids["sha"])[0].cwd == str(repo)
    assert store.read(ids["iso"])[0].cwd == str((repo / ".git" / "dsh-worktrees" / lead_id / "iso").resolve())
    assert (repo / "sha.txt").exists()  # shared: written straight into the Lead's checkout
    assert not (repo / "iso.txt").exists()  # its own worktree, never merged (no task): kept there
    assert (repo / ".git" / "dsh-worktrees" / lead_id / "iso" / "iso.txt").exists()


def test_dsh_run_keep_worktrees_keeps_a_merged_worktree(tmp_path: Path) -> None:
    from host_spec.host.cli.main import main

    repo = make_repo(tmp_path / "repo")
    script = write_script(tmp_path, {
        "lead": [{"text": "t", "tool_calls": [
            {"name": "team_task_create", "arguments": {"subject": "s", "description": "d"}},
            {"name": "spawn_teammate", "arguments": {"name": "kim", "description": "k", "prompt": "task-1"}}]}],
        "kim": [{"text": "w", "tool_calls": [
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 1, "action": "claim"}},
            {"name": "write_file", "arguments": {"path": "kim.txt", "content": "k"}},
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 2,
                                                       "action": "complete"}}]}],
    })  # fmt: skip
    profile = write_profile(tmp_path)
    base = ["--profile", str(profile), "--model", f"scripted:{script}", "--data-dir", str(tmp_path / "data")]
    assert main(["run", *base, "--workspace", str(repo), "--keep-worktrees", "go"]) == 0
    spot = repo / ".git" / "dsh-worktrees" / "session-1" / "kim"
    assert (repo / "kim.txt").read_text() == "k" and spot.is_dir()  # merged, and kept as asked
    assert main(["resume", *base, "session-1"]) == 0  # without the flag: the clean end removes it
    assert not spot.exists()
