"""The host's git worktrees on real repositories: place, create, commit, plan, move, sync, remove.

Git itself is the oracle: every assertion reads refs, trees and files back with
the ``git`` command, never through the implementation under test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from host_spec.host.worktrees.git import GitWorktrees
from host_spec.worktrees import WorktreeCode, WorktreeError, Worktrees, WorktreeSpot

from wt_kit import git, make_repo

GIT = GitWorktrees()


def test_it_is_the_contract_type() -> None:
    assert isinstance(GIT, Worktrees)


def test_a_directory_that_is_no_repository_names_git_init(tmp_path: Path) -> None:
    with pytest.raises(WorktreeError) as caught:
        GIT.place(str(tmp_path), team="t", member="m")
    assert caught.value.code == WorktreeCode.UNAVAILABLE and "git init" in caught.value.message


def test_a_repository_without_a_commit_names_the_fix(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    with pytest.raises(WorktreeError) as caught:
        GIT.place(str(tmp_path), team="t", member="m")
    assert caught.value.code == WorktreeCode.UNAVAILABLE and "commit" in caught.value.message


def test_a_missing_directory_and_a_missing_git_are_unavailable(tmp_path: Path) -> None:
    with pytest.raises(WorktreeError) as caught:
        GIT.place(str(tmp_path / "nope"), team="t", member="m")
    assert caught.value.code == WorktreeCode.UNAVAILABLE
    repo = make_repo(tmp_path / "repo")
    with pytest.raises(WorktreeError) as caught:
        GitWorktrees(git=str(tmp_path / "no-git")).place(str(repo), team="t", member="m")
    assert caught.value.code == WorktreeCode.UNAVAILABLE


def test_an_invalid_branch_name_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    with pytest.raises(WorktreeError):
        GIT.place(str(repo), team="a..b", member="m")


def test_the_worktree_lives_in_the_git_dir_where_status_never_shows_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    spot = GIT.place(str(repo), team="session-1", member="alice")
    assert spot.branch == "dsh/session-1/alice"
    assert Path(spot.path) == (repo / ".git" / "dsh-worktrees" / "session-1" / "alice").resolve()
    base = GIT.create(str(repo), spot)
    assert base == git(repo, "rev-parse", "HEAD")
    assert git(spot.path, "rev-parse", "--abbrev-ref", "HEAD") == "dsh/session-1/alice"
    assert (Path(spot.path) / "shared.txt").read_text() == "base\n"
    assert git(repo, "status", "--porcelain") == ""  # the main checkout sees nothing
    assert GIT.create(str(repo), spot) == base  # idempotent: found, not made twice
    assert git(repo, "worktree", "list").count("dsh-worktrees") == 1


def test_a_removed_worktree_comes_back_from_its_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    spot = GIT.place(str(repo), team="t", member="m")
    GIT.create(str(repo), spot)
    Path(spot.path, "new.txt").write_text("work\n")
    head = GIT.commit_all(spot, "work", author="m")
    assert head is not None
    assert git(repo, "log", "-1", "--format=%an|%s", "dsh/t/m") == "m (dsh)|work"
    git(repo, "worktree", "remove", "--force", spot.path)  # by hand, behind the Team's back
    assert GIT.create(str(repo), spot) == head
    assert Path(spot.path, "new.txt").read_text() == "work\n"


def test_commit_all_with_nothing_changed_commits_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    spot = GIT.place(str(repo), team="t", member="m")
    GIT.create(str(repo), spot)
    assert GIT.commit_all(spot, "nothing", author="m") is None
    assert GIT.plan_merge(str(repo), spot, message="m").empty


def test_fast_forward_then_merge_commit_then_conflict(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"shared.txt": "base\n", "other.txt": "o\n"})
    one, two = (GIT.place(str(repo), team="t", member=name) for name in ("one", "two"))
    for spot in (one, two):
        GIT.create(str(repo), spot)
    Path(one.path, "shared.txt").write_text("one\n")
    GIT.commit_all(one, "one", author="one")
    plan = GIT.plan_merge(str(repo), one, message="merge one")
    assert plan.fast_forward and plan.new == git(repo, "rev-parse", "dsh/t/one") and plan.blocked is None
    assert plan.target == "refs/heads/main" and plan.old == git(repo, "rev-parse", "main")
    assert git(repo, "rev-parse", "main") == plan.old  # planning moved nothing
    assert GIT.move_ref(str(repo), plan) and GIT.move_ref(str(repo), plan)  # again: already there
    GIT.sync_checkout(str(repo), plan)
    GIT.sync_checkout(str(repo), plan)  # idempotent
    assert (repo / "shared.txt").read_text() == "one\n" and git(repo, "status", "--porcelain") == ""
    assert GIT.merge_applied(str(repo), plan)
    # two changed another file: a real merge commit
    Path(two.path, "other.txt").write_text("two\n")
    GIT.commit_all(two, "two", author="two")
    plan2 = GIT.plan_merge(str(repo), two, message="merge two")
    assert not plan2.fast_forward and not plan2.conflicts
    assert git(repo, "rev-parse", f"{plan2.new}^1") == plan.new
    assert git(repo, "rev-parse", f"{plan2.new}^2") == git(repo, "rev-parse", "dsh/t/two")
    assert not GIT.merge_applied(str(repo), plan2)
    assert GIT.move_ref(str(repo), plan2)
    GIT.sync_checkout(str(repo), plan2)
    assert (repo / "other.txt").read_text() == "two\n" and (repo / "shared.txt").read_text() == "one\n"
    # three edits shared.txt from the old base: a conflict, nothing moves
    three = GIT.place(str(repo), team="t", member="three")
    git(repo, "branch", "dsh/t/three", plan.old)
    GIT.create(str(repo), three)
    Path(three.path, "shared.txt").write_text("three\n")
    GIT.commit_all(three, "three", author="three")
    before = git(repo, "rev-parse", "main")
    plan3 = GIT.plan_merge(str(repo), three, message="merge three")
    assert plan3.conflicts == ("shared.txt",) and plan3.new == plan3.old and not plan3.empty
    assert git(repo, "rev-parse", "main") == before
    assert (repo / "shared.txt").read_text() == "one\n"


class TestTheLeadsBranchMergedIntoAWorktree:
    """On a conflict the host merges the Lead's branch into the member's worktree; the member edits markers away."""

    def conflicted(self, tmp_path: Path) -> tuple[Path, WorktreeSpot]:
        repo = make_repo(tmp_path / "repo", {"shared.txt": "base\n", "other.txt": "o\n"})
        spot = GIT.place(str(repo), team="t", member="m")
        GIT.create(str(repo), spot)
        Path(spot.path, "shared.txt").write_text("member\n")
        GIT.commit_all(spot, "m", author="m")
        (repo / "shared.txt").write_text("lead\n")
        git(repo, "commit", "-qam", "lead")
        return repo, spot

    def test_a_conflict_leaves_markers_until_edited_then_the_commit_concludes_it(self, tmp_path: Path) -> None:
        repo, spot = self.conflicted(tmp_path)
        assert GIT.pending_merge(spot) is None
        assert GIT.plan_merge(str(repo), spot, message="x").conflicts == ("shared.txt",)
        assert GIT.merge_lead(str(repo), spot, author="m") == ("shared.txt",)
        text = Path(spot.path, "shared.txt").read_text()
        assert text.startswith("<<<<<<< ") and "member\n" in text and "lead\n" in text
        assert GIT.pending_merge(spot) == ("shared.txt",)
        Path(spot.path, "shared.txt").write_text("member\n")  # its own side, as committed
        assert GIT.pending_merge(spot) == ()
        head = GIT.commit_all(spot, "resolved", author="m")
        assert head is not None and GIT.pending_merge(spot) is None
        assert git(repo, "rev-parse", f"{head}^2") == git(repo, "rev-parse", "main")  # the Lead's head is a parent
        plan = GIT.plan_merge(str(repo), spot, message="x")
        assert plan.fast_forward and not plan.conflicts
        assert git(repo, "log", "-1", "--format=%an", head) == "m (dsh)"

    def test_a_clean_merge_is_committed_at_once(self, tmp_path: Path) -> None:
        repo, spot = self.conflicted(tmp_path)
        git(repo, "revert", "--no-edit", "HEAD")
        (repo / "other.txt").write_text("lead\n")
        git(repo, "commit", "-qam", "lead again")
        assert GIT.merge_lead(str(repo), spot, author="m") == ()
        assert GIT.pending_merge(spot) is None
        assert Path(spot.path, "other.txt").read_text() == "lead\n"
        assert GIT.plan_merge(str(repo), spot, message="x").fast_forward

    def test_a_merge_git_refuses_is_aborted_and_raised(self, tmp_path: Path) -> None:
        repo, spot = self.conflicted(tmp_path)
        Path(spot.path, "shared.txt").write_text("uncommitted\n")
        with pytest.raises(WorktreeError) as caught:
            GIT.merge_lead(str(repo), spot, author="m")
        assert caught.value.code == WorktreeCode.GIT_FAILED and "git merge failed" in caught.value.message
        assert GIT.pending_merge(spot) is None
        assert Path(spot.path, "shared.txt").read_text() == "uncommitted\n"

    def test_a_deleted_conflicted_file_counts_as_resolved(self, tmp_path: Path) -> None:
        repo, spot = self.conflicted(tmp_path)
        GIT.merge_lead(str(repo), spot, author="m")
        Path(spot.path, "shared.txt").unlink()
        assert GIT.pending_merge(spot) == ()


def test_a_moved_branch_fails_the_compare_and_set(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    spot = GIT.place(str(repo), team="t", member="m")
    GIT.create(str(repo), spot)
    Path(spot.path, "m.txt").write_text("m\n")
    GIT.commit_all(spot, "m", author="m")
    plan = GIT.plan_merge(str(repo), spot, message="merge")
    (repo / "user.txt").write_text("u\n")
    git(repo, "add", "user.txt")
    git(repo, "commit", "-q", "-m", "the user commits meanwhile")
    moved = git(repo, "rev-parse", "main")
    assert not GIT.move_ref(str(repo), plan)
    assert git(repo, "rev-parse", "main") == moved


def test_local_changes_are_kept_or_block_the_merge(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"shared.txt": "base\n", "mine.txt": "mine\n"})
    spot = GIT.place(str(repo), team="t", member="m")
    GIT.create(str(repo), spot)
    Path(spot.path, "shared.txt").write_text("member\n")
    GIT.commit_all(spot, "m", author="m")
    (repo / "shared.txt").write_text("user edit\n")  # the user's uncommitted edit of the same path
    blocked = GIT.plan_merge(str(repo), spot, message="merge")
    assert blocked.blocked is not None and "uncommitted" in blocked.blocked
    git(repo, "checkout", "shared.txt")
    (repo / "mine.txt").write_text("user's other edit\n")  # another path: carried over
    plan = GIT.plan_merge(str(repo), spot, message="merge")
    assert plan.blocked is None
    GIT.move_ref(str(repo), plan)
    GIT.sync_checkout(str(repo), plan)
    assert (repo / "shared.txt").read_text() == "member\n"
    assert (repo / "mine.txt").read_text() == "user's other edit\n"
    assert git(repo, "status", "--porcelain") == "M mine.txt"


def test_a_detached_head_blocks(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    spot = GIT.place(str(repo), team="t", member="m")
    GIT.create(str(repo), spot)
    Path(spot.path, "m.txt").write_text("m\n")
    GIT.commit_all(spot, "m", author="m")
    git(repo, "checkout", "-q", "--detach")
    plan = GIT.plan_merge(str(repo), spot, message="merge")
    assert plan.blocked is not None and "detached" in plan.blocked


def test_sync_leaves_a_checkout_on_another_branch_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    spot = GIT.place(str(repo), team="t", member="m")
    GIT.create(str(repo), spot)
    Path(spot.path, "m.txt").write_text("m\n")
    GIT.commit_all(spot, "m", author="m")
    plan = GIT.plan_merge(str(repo), spot, message="merge")
    GIT.move_ref(str(repo), plan)
    git(repo, "checkout", "-q", "-b", "elsewhere", plan.old)
    GIT.sync_checkout(str(repo), plan)
    assert not (repo / "m.txt").exists()


def test_state_diff_and_remove(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    spot = GIT.place(str(repo), team="t", member="m")
    assert GIT.state(str(repo), spot).exists is False
    GIT.create(str(repo), spot)
    assert GIT.state(str(repo), spot).merged
    Path(spot.path, "shared.txt").write_text("changed\n")
    Path(spot.path, "fresh.txt").write_text("fresh\n")
    state = GIT.state(str(repo), spot)
    assert state.dirty and state.ahead == 0 and not state.merged
    diff = GIT.diff(str(repo), spot)
    assert "+changed" in diff and "+fresh" in diff
    assert "?? fresh.txt" in git(spot.path, "status", "--porcelain")  # read-only: nothing was added to its index
    assert GIT.remove(str(repo), spot) is False and os.path.isdir(spot.path)  # work left: kept
    GIT.commit_all(spot, "work", author="m")
    state = GIT.state(str(repo), spot)
    assert state.ahead == 1 and not state.dirty
    assert "+changed" in GIT.diff(str(repo), spot)
    assert GIT.remove(str(repo), spot) is False
    assert GIT.remove(str(repo), spot, force=True) is True
    assert not os.path.exists(spot.path) and git(repo, "branch", "--list", "dsh/*") == ""
    assert GIT.remove(str(repo), spot) is True  # gone already
    assert GIT.diff(str(repo), spot) == ""


def test_a_merged_worktree_is_removed_with_its_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    spot = GIT.place(str(repo), team="t", member="m")
    GIT.create(str(repo), spot)
    Path(spot.path, "m.txt").write_text("m\n")
    GIT.commit_all(spot, "m", author="m")
    plan = GIT.plan_merge(str(repo), spot, message="merge")
    GIT.move_ref(str(repo), plan)
    GIT.sync_checkout(str(repo), plan)
    assert GIT.state(str(repo), spot).merged
    assert GIT.remove(str(repo), spot)
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "branch", "--list", "dsh/*") == ""


def test_git_failures_are_typed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    spot = GIT.place(str(repo), team="t", member="m")
    with pytest.raises(WorktreeError) as caught:
        GIT.plan_merge(str(repo), spot, message="no branch yet")
    assert caught.value.code == WorktreeCode.GIT_FAILED
    with pytest.raises(WorktreeError) as caught:
        GIT.commit_all(spot, "no worktree", author="m")
    assert caught.value.code == WorktreeCode.UNAVAILABLE  # its directory does not exist
