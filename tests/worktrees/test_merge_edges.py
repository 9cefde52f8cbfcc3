"""Worktree mode at its edges, on real git: blocked merges, a branch moving under a merge, git failing.

Where git has to misbehave at an exact moment, the host's own git worktrees are
wrapped (a subclass of :class:`GitWorktrees`, provided through the public service
seam before the ``workspace`` plugin loads, as a fault-injecting storage is):
the user commits on the Lead's branch right after a merge was planned, the
checkout sync or a removal fails, git dies while moving the branch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_team.core.fold import replay
from host_spec import hookimpl
from host_spec.host.app import Host
from host_spec.host.cli.main import main
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.worktrees.git import GitWorktrees
from host_spec.worktrees import MergePlan, WorktreeError, Worktrees, WorktreeSpot
from wt_kit import git, lead_events, make_repo, records, write_profile, write_script

pytestmark = pytest.mark.timeout_s(120)


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def script(*dana: dict[str, Any]) -> dict[str, Any]:
    return {
        "lead": [{"text": "plan", "tool_calls": [
            _call("team_task_create", subject="dana's task", description="d"),
            _call("spawn_teammate", name="dana", description="d", prompt="task-1")]}, {"text": "waiting"}],
        "dana": [*dana, {"text": "done"}],
    }  # fmt: skip


def work(*extra: dict[str, Any], path: str = "dana.txt") -> dict[str, Any]:
    return {"text": "work", "tool_calls": [
        _call("team_task_update", task_id="task-1", expected_revision=1, action="claim"),
        *([_call("read_file", path=path)] if path == "shared.txt" else []),
        _call("write_file", path=path, content="by dana\n"), *extra,
        _call("team_task_update", task_id="task-1", expected_revision=2, action="complete")]}  # fmt: skip


class Provided:
    """A plugin providing ``worktrees`` as the host's :class:`Worktrees` (loaded before ``workspace``)."""

    def __init__(self, worktrees: Worktrees) -> None:
        self.worktrees = worktrees

    @hookimpl
    def dsh_plugin_loaded(self, host: Any, ctx: Any) -> None:
        ctx.provide(Worktrees, self.worktrees)


async def run(tmp_path: Path, plan: dict[str, Any], *, repo: Path | None = None, worktrees: Worktrees | None = None,
              profile: Path | None = None, cwd: bool = True, resume: str | None = None) -> tuple[Path, Path, str]:
    repo = repo if repo is not None else (tmp_path / "repo" if (tmp_path / "repo").exists() else make_repo(tmp_path / "repo"))
    data = tmp_path / "data"
    extra = [("wrapped-git", Provided(worktrees))] if worktrees is not None else []
    host = await Host.open(data, str(profile or write_profile(tmp_path)), f"scripted:{write_script(tmp_path, plan)}",
                           extra_plugins=extra)
    try:
        if resume is not None:
            await host.resume(resume)
            return repo, data, resume
        agent = await host.run("go", cwd=str(repo) if cwd else None)
        return repo, data, str(agent.id)
    finally:
        await host.close()


def errors(data: Path, session_id: str, tool: str = "team_task_update") -> list[str | None]:
    return [e.value().get("error", {}).get("code") for e in JsonlStore(data).read(session_id)[1]
            if e.type == "tool/result" and e.value()["name"] == tool]


def member_id(data: Path, lead_id: str) -> str:
    (dana,) = replay(lead_events(data, lead_id), lead_id).members.listed()
    return dana.id


def task_status(data: Path, lead_id: str) -> str:
    return replay(lead_events(data, lead_id), lead_id).tasks.tasks["task-1"].status


async def test_the_users_uncommitted_edit_of_the_same_file_blocks_the_merge(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "shared.txt").write_text("the user's edit\n")
    _, data, lead_id = await run(tmp_path, script(work(path="shared.txt")))
    assert errors(data, member_id(data, lead_id)) == [None, "TEAM_MERGE_BLOCKED"]
    assert task_status(data, lead_id) == "in_progress"
    assert (repo / "shared.txt").read_text() == "the user's edit\n"  # never overwritten
    assert git(repo, "log", "--format=%an", "main") == "Test User"  # nothing merged
    assert records(data, lead_id, "team/merge") == []


class Damaged(GitWorktrees):
    """The worktree's ``.git`` link is gone when the completion commits (a member's sandbox cannot do this)."""

    def commit_all(self, spot: WorktreeSpot, message: str, *, author: str) -> str | None:
        Path(spot.path, ".git").unlink(missing_ok=True)
        return super().commit_all(spot, message, author=author)


async def test_a_damaged_worktree_blocks_the_merge(tmp_path: Path) -> None:
    _, data, lead_id = await run(tmp_path, script(work()), worktrees=Damaged())
    assert errors(data, member_id(data, lead_id)) == [None, "TEAM_MERGE_BLOCKED"]
    assert task_status(data, lead_id) == "in_progress"


def conflicting(*again: dict[str, Any]) -> dict[str, Any]:
    """dana edits shared.txt while the user commits another version of it on main, then completes."""
    return script(work(path="shared.txt"), *again)


class UserEditsShared(GitWorktrees):
    """The user commits ``shared.txt`` on the Lead's branch just before the member's change is committed."""

    def __init__(self) -> None:
        super().__init__()
        self.done = False

    def commit_all(self, spot: WorktreeSpot, message: str, *, author: str) -> str | None:
        if not self.done:
            self.done = True
            root = Path(spot.path).parents[3]  # <repo>/.git/dsh-worktrees/<team>/<member>
            Path(root, "shared.txt").write_text("the user's line\n")
            git(root, "add", "-A")
            git(root, "commit", "-q", "-m", "the user commits")
        return super().commit_all(spot, message, author=author)


async def test_completing_with_markers_left_is_refused_until_they_are_edited_away(tmp_path: Path) -> None:
    lazy = {"when": "conflicts in", "text": "complete at once", "tool_calls": [
        _call("team_task_update", task_id="task-1", expected_revision=2, action="complete")]}
    fix = {"when": "still hold conflict markers", "text": "resolve", "tool_calls": [
        _call("read_file", path="shared.txt"),
        _call("write_file", path="shared.txt", content="the user's line\nby dana\n"),
        _call("team_task_update", task_id="task-1", expected_revision=2, action="complete")]}
    repo, data, lead_id = await run(tmp_path, conflicting(lazy, fix), worktrees=UserEditsShared())
    assert errors(data, member_id(data, lead_id)) == [None, "TEAM_MERGE_CONFLICT", "TEAM_MERGE_CONFLICT", None]
    assert task_status(data, lead_id) == "completed"
    assert (repo / "shared.txt").read_text() == "the user's line\nby dana\n"
    assert git(repo, "rev-list", "--count", "--merges", "main") == "1"  # dana's merge of main, fast-forwarded
    assert git(repo, "status", "--porcelain") == ""


class LeadMergeFails(UserEditsShared):
    def merge_lead(self, root: str, spot: WorktreeSpot, *, author: str) -> tuple[str, ...]:
        raise WorktreeError("git merge failed: the disk is full")


async def test_a_merge_into_the_worktree_that_fails_blocks_the_completion(tmp_path: Path) -> None:
    repo, data, lead_id = await run(tmp_path, conflicting(), worktrees=LeadMergeFails())
    assert errors(data, member_id(data, lead_id)) == [None, "TEAM_MERGE_BLOCKED"]
    assert task_status(data, lead_id) == "in_progress"
    assert (repo / "shared.txt").read_text() == "the user's line\n"  # main is the user's


class ConflictGone(UserEditsShared):
    """The planned conflict is gone by the time the worktree merges (the user reverted meanwhile)."""

    def merge_lead(self, root: str, spot: WorktreeSpot, *, author: str) -> tuple[str, ...]:
        git(root, "revert", "--no-edit", "HEAD")
        return super().merge_lead(root, spot, author=author)


async def test_a_conflict_gone_by_the_worktree_merge_is_planned_again(tmp_path: Path) -> None:
    repo, data, lead_id = await run(tmp_path, conflicting(), worktrees=ConflictGone())
    assert errors(data, member_id(data, lead_id)) == [None, None]
    assert task_status(data, lead_id) == "completed"
    assert (repo / "shared.txt").read_text() == "by dana\n"


class UserCommits(GitWorktrees):
    """The user commits on the Lead's branch right after each of the first ``times`` merge plans."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.times = times

    def plan_merge(self, root: str, spot: WorktreeSpot, *, message: str) -> MergePlan:
        plan = super().plan_merge(root, spot, message=message)
        if self.times:
            self.times -= 1
            Path(root, f"user-{self.times}.txt").write_text("u\n")
            git(root, "add", "-A")
            git(root, "commit", "-q", "-m", f"the user commits {self.times}")
        return plan


async def test_a_branch_moved_under_the_merge_is_planned_again(tmp_path: Path) -> None:
    repo, data, lead_id = await run(tmp_path, script(work()), worktrees=UserCommits(1))
    assert task_status(data, lead_id) == "completed"
    phases = [r["phase"] for r in records(data, lead_id, "team/merge")]
    assert phases == ["intent", "abandoned", "intent", "done"]
    assert git(repo, "log", "--format=%an", "main").splitlines().count("dana (dsh)") == 1
    assert git(repo, "rev-list", "--count", "--merges", "main") == "1"  # on top of the user's commit
    assert (repo / "user-0.txt").exists() and (repo / "dana.txt").exists()


async def test_a_branch_that_keeps_moving_blocks_after_three_plans(tmp_path: Path) -> None:
    _, data, lead_id = await run(tmp_path, script(work()), worktrees=UserCommits(3))
    assert errors(data, member_id(data, lead_id)) == [None, "TEAM_MERGE_BLOCKED"]
    assert task_status(data, lead_id) == "in_progress"
    assert [r["phase"] for r in records(data, lead_id, "team/merge")].count("abandoned") == 3


class SyncFails(GitWorktrees):
    def sync_checkout(self, root: str, plan: MergePlan) -> None:
        raise WorktreeError("a local change now stands in the way")


async def test_a_failed_checkout_sync_still_completes_the_merged_task(tmp_path: Path) -> None:
    repo, data, lead_id = await run(tmp_path, script(work()), worktrees=SyncFails())
    assert task_status(data, lead_id) == "completed"
    assert [r["phase"] for r in records(data, lead_id, "team/merge")] == ["intent", "done"]
    assert git(repo, "log", "-1", "--format=%an", "main") == "dana (dsh)"  # the branch moved
    assert not (repo / "dana.txt").exists()  # the files are the user's to update


class CreateAndRemoveFail(GitWorktrees):
    def create(self, root: str, spot: WorktreeSpot) -> str:
        raise WorktreeError("disk full")

    def remove(self, root: str, spot: WorktreeSpot, *, force: bool = False) -> bool:
        raise WorktreeError("locked")


async def test_a_worktree_git_cannot_create_fails_the_member(tmp_path: Path) -> None:
    _, data, lead_id = await run(tmp_path, script(work()), worktrees=CreateAndRemoveFail())
    (dana,) = replay(lead_events(data, lead_id), lead_id).members.listed()
    assert dana.phase == "failed" and "disk full" in (dana.error or "")
    assert errors(data, lead_id, "spawn_teammate") == ["TEAM_WORKTREE_UNAVAILABLE"]
    assert not (data / "sessions" / dana.id).exists()  # never started


class MoveDies(GitWorktrees):
    def move_ref(self, root: str, plan: MergePlan) -> bool:
        raise RuntimeError("git was killed")


class AppliedFails(GitWorktrees):
    def merge_applied(self, root: str, plan: MergePlan) -> bool:
        raise RuntimeError("git is broken")


async def test_an_intent_left_open_is_recovered_at_the_next_start(tmp_path: Path) -> None:
    again = {"when": "restart", "text": "again", "tool_calls": [
        _call("team_task_update", task_id="task-1", expected_revision=2, action="complete")]}
    plan = script(work(), again)
    repo, data, lead_id = await run(tmp_path, plan, worktrees=MoveDies())
    assert [r["phase"] for r in records(data, lead_id, "team/merge")] == ["intent"]
    await run(tmp_path, plan, worktrees=AppliedFails(), resume=lead_id)  # recovery fails: logged, left open
    assert [r["phase"] for r in records(data, lead_id, "team/merge")] == ["intent"]
    await run(tmp_path, plan, resume=lead_id)
    phases = [r["phase"] for r in records(data, lead_id, "team/merge")]
    assert phases[:2] == ["intent", "abandoned"] and phases[-1] == "done"
    assert task_status(data, lead_id) == "completed"
    assert git(repo, "log", "--format=%an", "main").splitlines().count("dana (dsh)") == 1


async def test_no_worktree_service_no_workspace_or_a_leftover_branch_refuse_the_spawn(tmp_path: Path) -> None:
    bare = tmp_path / "bare.toml"
    bare.write_text('extends = "agent-teams"\ndisable = ["workspace"]\n\n[plugins.dsh-team]\nworkspace_mode = "worktree"\n')
    _, data, lead_id = await run(tmp_path, script(), profile=bare)
    assert errors(data, lead_id, "spawn_teammate") == ["TEAM_WORKTREE_UNAVAILABLE"]
    for leftover in ("nowhere", "branch"):
        shutil_rm(tmp_path / "data")
        if leftover == "branch":
            git(tmp_path / "repo", "branch", "dsh/session-1/dana")
        _, data, lead_id = await run(tmp_path, script(), cwd=leftover != "nowhere")
        results = [e.value() for e in JsonlStore(data).read(lead_id)[1]
                   if e.type == "tool/result" and e.value()["name"] == "spawn_teammate"]
        assert results[0]["error"]["code"] == "TEAM_WORKTREE_UNAVAILABLE"
        assert ("--workspace" if leftover == "nowhere" else "git branch -D dsh/session-1/dana") in \
            results[0]["error"]["message"]
        assert records(data, lead_id, "team/worktree") == []


def shutil_rm(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def test_keep_worktrees_keeps_a_merged_one_and_a_gone_one_comes_back_on_wake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wake = {"when": "please", "text": "complete now", "tool_calls": [
        _call("write_file", path="late.txt", content="late\n"),
        _call("team_task_update", task_id="task-2", expected_revision=1, action="claim"),
        _call("team_task_update", task_id="task-2", expected_revision=2, action="complete")]}
    plan = script(work(), wake)
    plan["lead"][0]["tool_calls"].insert(1, _call("team_task_create", subject="later", description="d"))
    kept = write_profile(tmp_path, extra="keep_worktrees = true")
    repo, data, lead_id = asyncio.run(run(tmp_path, plan, profile=kept))
    spot = repo / ".git" / "dsh-worktrees" / lead_id / "dana"
    assert task_status(data, lead_id) == "completed" and spot.is_dir()  # merged, and kept
    git(repo, "worktree", "remove", "--force", str(spot))  # gone by hand
    capsys.readouterr()
    assert main(["team", "send", "--data-dir", str(data), "dana", "please do task-2"]) == 0
    asyncio.run(run(tmp_path, plan, resume=lead_id, profile=write_profile(tmp_path)))
    assert (repo / "late.txt").read_text() == "late\n"  # worked in its worktree again, merged
    state = replay(lead_events(data, lead_id), lead_id)
    assert state.tasks.tasks["task-2"].status == "completed"
    assert not spot.exists()  # this time the Team's end removed it (keep_worktrees off)


def test_a_member_whose_worktree_cannot_come_back_never_falls_back_to_the_main_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wake = {"when": "please", "text": "write", "tool_calls": [_call("write_file", path="late.txt", content="x")]}
    plan = script({"text": "claim only", "tool_calls": [
        _call("team_task_update", task_id="task-1", expected_revision=1, action="claim"),
        _call("write_file", path="early.txt", content="e\n")]}, wake)
    repo, data, lead_id = asyncio.run(run(tmp_path, plan))
    spot = repo / ".git" / "dsh-worktrees" / lead_id / "dana"
    assert (spot / "early.txt").exists()  # unmerged work: kept at the end
    git(repo, "worktree", "remove", "--force", str(spot))
    capsys.readouterr()
    assert main(["team", "send", "--data-dir", str(data), "dana", "please write"]) == 0
    asyncio.run(run(tmp_path, plan, worktrees=CreateAndRemoveFail(), resume=lead_id))
    assert errors(data, member_id(data, lead_id), "write_file")[-1] == "NO_WORKSPACE"
    assert not (repo / "late.txt").exists() and not (spot / "late.txt").exists()


SHUTDOWN = {
    "lead": [
        {"text": "plan", "tool_calls": [
            _call("team_task_create", subject="gus's task", description="d"),
            _call("spawn_teammate", name="gus", description="g", prompt="task-1")]},
        {"when": "gus finished", "text": "stop him", "tool_calls": [
            _call("send_message", target="gus", message="please stop", shutdown="request")]},
        {"text": "waiting"}],
    "gus": [
        {"text": "work", "tool_calls": [
            _call("team_task_update", task_id="task-1", expected_revision=1, action="claim"),
            _call("write_file", path="gus.txt", content="g\n"),
            _call("team_task_update", task_id="task-1", expected_revision=2, action="complete"),
            _call("send_message", target="lead", message="gus finished")]},
        {"when": "please stop", "text": "ok", "tool_calls": [
            _call("send_message", target="lead", message="stopping", shutdown="approve")]},
        {"text": "bye"}],
}  # fmt: skip


class RemoveFails(GitWorktrees):
    def remove(self, root: str, spot: WorktreeSpot, *, force: bool = False) -> bool:
        raise WorktreeError("locked")


@pytest.mark.parametrize("variant", ["removed", "kept", "failing"])
async def test_a_member_shut_down_loses_its_merged_worktree_before_the_team_ends(tmp_path: Path, variant: str) -> None:
    repo = make_repo(tmp_path / "repo")
    profile = write_profile(tmp_path, extra="keep_worktrees = true" if variant == "kept" else "")
    extra = [("wrapped-git", Provided(RemoveFails()))] if variant == "failing" else []
    host = await Host.open(tmp_path / "data", str(profile), f"scripted:{write_script(tmp_path, SHUTDOWN)}",
                           extra_plugins=extra)
    try:
        agent = await host.run("go", cwd=str(repo))
        spot = repo / ".git" / "dsh-worktrees" / agent.id / "gus"
        shutdowns = [r["phase"] for r in records(tmp_path / "data", agent.id, "team/shutdown")]
        assert shutdowns == ["requested", "approved", "released"]
        assert (repo / "gus.txt").exists()  # merged on completion
        assert spot.exists() == (variant != "removed")  # the Team has not ended yet: still running
    finally:
        await host.close()
    assert spot.exists() == (variant != "removed")
