"""SIGKILL at every durable point of worktree creation and of the merge, then resume (real subprocesses).

Each case runs a one-member Team in a real subprocess (:mod:`wt_crash_driver`)
until it SIGKILLs itself at the point, then resumes the run (``dsh resume``, here
in the test's own process) with the same script. Git is the oracle:

* creation: no worktree nobody knows about -- the member ends ``active`` with its
  worktree, or ``failed`` with none; ``git worktree list`` holds exactly the
  active members' worktrees;
* merge: done exactly once or not at all -- after the resume (and the member
  completing again once told of the restart) the Lead's branch holds the
  member's commit exactly once, the task is ``completed``, the checkout is clean
  and equals the branch, and no ``team/merge`` is left at ``intent``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dsh_team.core.fold import replay
from host_spec.host.app import Host
from kit_worktree_teams import one_member_team
from wt_kit import git, lead_events, make_repo, records, write_profile, write_script

pytestmark = [pytest.mark.slow, pytest.mark.timeout_s(180)]

DRIVER = Path(__file__).with_name("wt_crash_driver.py")

SCRIPT = one_member_team("restart")

CREATION = ["worktree-recorded", "worktree-created", "member-started"]
MERGE = ["merge-committed", "merge-intent", "ref-moved", "checkout-synced", "task-completed"]


async def drive(tmp_path: Path, point: str) -> tuple[Path, Path, str]:
    repo = make_repo(tmp_path / "repo")
    data = tmp_path / "data"
    script = write_script(tmp_path, SCRIPT)
    profile = write_profile(tmp_path)
    args = [sys.executable, str(DRIVER), str(data), str(repo), str(script), str(profile)]
    killed = subprocess.run([*args, point, "go"], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr[-2000:]
    lead_id = "session-1"
    in_window(point, repo, data, lead_id)
    host = await Host.open(data, str(profile), f"scripted:{script}")  # dsh resume, in this process
    try:
        await host.resume(lead_id)
    finally:
        await host.close()
    return repo, data, lead_id


def in_window(point: str, repo: Path, data: Path, lead_id: str) -> None:
    """The kill happened exactly where the point says (before the resume)."""
    state = replay(lead_events(data, lead_id), lead_id)
    worktrees = records(data, lead_id, "team/worktree")
    merges = records(data, lead_id, "team/merge")
    base = git(repo, "rev-list", "--max-parents=0", "main")
    main = git(repo, "rev-parse", "main")
    if point in CREATION:
        (dana,) = state.members.listed()
        assert dana.phase == "provisioning" and len(worktrees) == 1
        assert Path(worktrees[0]["path"]).exists() == (point != "worktree-recorded")
        assert (data / "sessions" / dana.id).exists() == (point == "member-started")
        return
    task = state.tasks.tasks["task-1"]
    assert task.status == ("completed" if point == "task-completed" else "in_progress")
    assert git(repo, "log", "-1", "--format=%an", f"dsh/{lead_id}/dana") == "dana (dsh)"  # committed on its branch
    if point == "merge-committed":
        assert merges == [] and main == base
        return
    assert [m["phase"] for m in merges] == ["intent"]
    moved = point != "merge-intent"
    assert main == (merges[0]["new"] if moved else base)
    assert (repo / "dana.txt").exists() == (point in ("checkout-synced", "task-completed"))


def registered(repo: Path) -> list[str]:
    listing = git(repo, "worktree", "list", "--porcelain").splitlines()
    return [line.removeprefix("worktree ") for line in listing if line.startswith("worktree ")][1:]


@pytest.mark.parametrize("point", CREATION)
async def test_a_crash_while_creating_leaves_no_orphan(tmp_path: Path, point: str) -> None:
    repo, data, lead_id = await drive(tmp_path, point)
    state = replay(lead_events(data, lead_id), lead_id)
    (dana,) = state.members.listed()
    recorded = records(data, lead_id, "team/worktree")
    assert [r["member"] for r in recorded] == ["dana"]  # the place was recorded before git ran
    if point == "member-started":  # its prompt was durable: recovery makes it active, and it works on
        assert dana.phase == "active"
        assert state.tasks.tasks["task-1"].status == "completed"
        assert (repo / "dana.txt").read_text() == "by dana\n"
    else:
        assert dana.phase == "failed"
        assert not Path(recorded[0]["path"]).exists()
    assert registered(repo) == []  # merged, or never useful: nothing left behind
    assert git(repo, "branch", "--list", "dsh/*") == ""


@pytest.mark.parametrize("point", MERGE)
async def test_a_crash_while_merging_merges_exactly_once(tmp_path: Path, point: str) -> None:
    repo, data, lead_id = await drive(tmp_path, point)
    state = replay(lead_events(data, lead_id), lead_id)
    assert state.tasks.tasks["task-1"].status == "completed"
    authors = git(repo, "log", "--format=%an", "main").splitlines()
    assert authors.count("dana (dsh)") == 1  # the member's commit, exactly once
    assert (repo / "dana.txt").read_text() == "by dana\n"
    assert git(repo, "status", "--porcelain") == ""  # the checkout equals the branch
    merges = records(data, lead_id, "team/merge")
    latest = {r["merge_id"]: r["phase"] for r in merges}
    assert "intent" not in latest.values() and list(latest.values()).count("done") == 1
    if point in ("merge-committed", "merge-intent"):  # the branch never moved: told, completed again
        assert list(latest.values()).count("abandoned") == (1 if point == "merge-intent" else 0)
    assert registered(repo) == [] and git(repo, "branch", "--list", "dsh/*") == ""
