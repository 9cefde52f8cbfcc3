"""Worktree mode end to end: real git, the real host, the scripted model, the Agent Teams profile.

Two teammates edit the same line of the same file in their own worktrees and both
complete their tasks. Whichever completes first merges cleanly (a fast-forward);
the other gets ``TEAM_MERGE_CONFLICT`` naming the file, its task stays
``in_progress`` and the Lead's branch is untouched, and the host has merged ``main``
into its worktree; it resolves git's markers with the file tools (no git of its own:
the sandbox keeps ``.git`` read-only) and completes again, which concludes that merge
and fast-forwards ``main``. The scripts are symmetric, so the test holds whichever member wins the race.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_team.core.fold import replay
from kit_worktree_teams import CONFLICTING_TEAM
from wt_kit import git, lead_events, make_repo, records, run_team, write_profile, write_script

pytestmark = pytest.mark.timeout_s(120)


async def test_same_file_one_merges_one_conflicts_resolves_and_merges(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "main")
    data = tmp_path / "data"
    lead_id = await run_team(data, repo, write_script(tmp_path, CONFLICTING_TEAM), write_profile(tmp_path))

    state = replay(lead_events(data, lead_id), lead_id)
    assert state.failure is None
    assert {task.id: task.status for task in state.tasks.tasks.values()} == {
        "task-1": "completed", "task-2": "completed"}
    merges = [r for r in records(data, lead_id, "team/merge")]
    done = [r for r in merges if r["phase"] == "done"]
    assert [r["phase"] for r in merges].count("intent") == 2 and len(done) == 2
    first, second = done
    assert first["fast_forward"] is True  # the first one: the Lead's branch had not moved
    # the second member met the conflict; its branch, with main merged in, fast-forwarded main
    assert second["fast_forward"] is True
    loser = second["member"]
    winner = first["member"]
    # git is the oracle: main holds both members' commits and the loser's merge, shared.txt is its resolution
    log = git(repo, "log", "--format=%an|%s", f"{base}..main").splitlines()
    assert sorted(line.split("|")[0] for line in log) == sorted(["alice (dsh)", "bob (dsh)", f"{loser} (dsh)"])
    merge = git(repo, "log", "--merges", "--format=%an|%s|%P", f"{base}..main").splitlines()
    assert len(merge) == 1 and merge[0].startswith(f"{loser} (dsh)|") and "the Lead's branch merged in" in merge[0]
    assert first["new"] in merge[0].split("|")[2].split()  # its second parent is the winner's merged head
    assert (repo / "shared.txt").read_text() == f"{loser}\n"
    assert (repo / "alice.txt").read_text() == "by alice\n" and (repo / "bob.txt").read_text() == "by bob\n"
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "rev-parse", "main") == second["new"]
    # the loser saw the typed conflict naming the file, and main did not move for it
    loser_id = next(m.id for m in state.members.listed() if m.name == loser)
    results = [json.dumps(e.value()) for e in _events(data, loser_id) if e.type == "tool/result"]
    conflict = [r for r in results if "TEAM_MERGE_CONFLICT" in r]
    assert len(conflict) == 1 and "shared.txt" in conflict[0] and "main is now merged into your worktree" in conflict[0]
    assert first["new"] == second["old"]  # the conflict changed nothing on main in between
    assert winner != loser
    # a clean end: both worktrees were merged, so both are gone with their branches
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "branch", "--list", "dsh/*") == ""


def _events(data: Path, session_id: str) -> list[Any]:
    from host_spec.host.store.jsonl import JsonlStore

    return JsonlStore(data).read(session_id)[1]
