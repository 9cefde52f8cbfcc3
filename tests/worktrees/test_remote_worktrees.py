"""A member's worktree in a clone of the Lead's repository: create from the Lead, push back, receive, merge.

Two real repositories per test: the Lead's checkout (where the Team merges) and a
worker's clone of it (``git clone``), the Lead's repository reached by its path,
as a worker reaches it by ``--lead-repo``. Git is the oracle throughout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from host_spec.host.worktrees.git import KEPT, PUSHED, GitWorktrees
from host_spec.worktrees import RemoteWorktrees, WorktreeCode, WorktreeError, WorktreeSpot

from wt_kit import git, make_repo

GIT = GitWorktrees()


def two_machines(tmp_path: Path, name: str = "worker") -> tuple[Path, WorktreeSpot, Path, WorktreeSpot]:
    """The Lead's repository with member ``m``'s worktree, and a worker's clone with the member's place in it."""
    lead = make_repo(tmp_path / "lead")
    lead_spot = GIT.place(str(lead), team="session-1", member="m")
    GIT.create(str(lead), lead_spot)
    worker = tmp_path / name
    git(tmp_path, "clone", "-q", str(lead), str(worker))
    spot = GIT.mirror(str(worker), lead_spot.path)
    assert spot is not None
    return lead, lead_spot, worker, spot


def test_it_is_the_contract_type() -> None:
    assert isinstance(GIT, RemoteWorktrees)


def test_the_lead_side_worktree_maps_to_the_same_member_in_the_clone(tmp_path: Path) -> None:
    lead, lead_spot, worker, spot = two_machines(tmp_path)
    assert spot.branch == lead_spot.branch == "dsh/session-1/m"
    assert Path(spot.path) == (worker / ".git" / "dsh-worktrees" / "session-1" / "m").resolve()
    assert GIT.mirror(str(worker), str(lead)) is None  # the Lead's checkout itself: a shared-mode member
    assert GIT.mirror(str(worker), "/") is None


def test_the_worktree_is_made_from_the_members_branch_in_the_leads_repository(tmp_path: Path) -> None:
    lead, lead_spot, worker, spot = two_machines(tmp_path)
    Path(lead_spot.path, "from-lead.txt").write_text("lead side\n")  # the branch moved after the clone
    GIT.commit_all(lead_spot, "lead side", author="m")
    head = GIT.create_from(str(worker), spot, remote=str(lead))
    assert head == git(lead, "rev-parse", lead_spot.branch)
    assert git(spot.path, "rev-parse", "--abbrev-ref", "HEAD") == spot.branch
    assert Path(spot.path, "from-lead.txt").read_text() == "lead side\n"
    Path(spot.path, "work.txt").write_text("uncommitted\n")
    assert GIT.create_from(str(worker), spot, remote=str(lead)) == head  # kept as it is, with its work
    assert Path(spot.path, "work.txt").read_text() == "uncommitted\n"


def test_a_branch_the_lead_does_not_have_names_the_flag(tmp_path: Path) -> None:
    lead, _, worker, _ = two_machines(tmp_path)
    other = GIT.place(str(worker), team="session-1", member="nobody")
    with pytest.raises(WorktreeError) as caught:
        GIT.create_from(str(worker), other, remote=str(lead))
    assert caught.value.code == WorktreeCode.UNAVAILABLE and "--lead-repo" in caught.value.message
    assert not Path(other.path).exists()


def test_a_pushed_head_lands_beside_the_branch_and_is_received_with_its_files(tmp_path: Path) -> None:
    lead, lead_spot, worker, spot = two_machines(tmp_path)
    GIT.create_from(str(worker), spot, remote=str(lead))
    Path(spot.path, "work.txt").write_text("done on the worker\n")
    head = GIT.commit_all(spot, "task-1: work", author="m")
    assert head is not None
    before = git(lead, "rev-parse", lead_spot.branch)
    assert GIT.push(spot, remote=str(lead)) == head
    assert git(lead, "rev-parse", f"{PUSHED}{spot.branch}") == head
    assert git(lead, "rev-parse", lead_spot.branch) == before  # the Lead's worktree has it checked out: untouched
    assert GIT.receive(str(lead), lead_spot) == head
    assert git(lead, "rev-parse", lead_spot.branch) == head
    assert Path(lead_spot.path, "work.txt").read_text() == "done on the worker\n"
    assert git(lead_spot.path, "status", "--porcelain") == ""
    assert GIT.receive(str(lead), lead_spot) is None  # idempotent: a second receive after a crash changes nothing
    plan = GIT.plan_merge(str(lead), lead_spot, message="merge")
    assert plan.fast_forward and plan.new == head and plan.blocked is None
    assert GIT.move_ref(str(lead), plan)
    GIT.sync_checkout(str(lead), plan)
    assert Path(lead, "work.txt").read_text() == "done on the worker\n"


def test_receive_without_a_push_or_without_the_leads_worktree(tmp_path: Path) -> None:
    lead, lead_spot, worker, spot = two_machines(tmp_path)
    assert GIT.receive(str(lead), lead_spot) is None
    GIT.create_from(str(worker), spot, remote=str(lead))
    Path(spot.path, "work.txt").write_text("w\n")
    head = GIT.commit_all(spot, "w", author="m")
    GIT.push(spot, remote=str(lead))
    git(lead, "worktree", "remove", "--force", lead_spot.path)  # no worktree and no branch on the Lead's side
    git(lead, "branch", "-D", lead_spot.branch)
    assert GIT.receive(str(lead), lead_spot) == head
    assert git(lead, "rev-parse", lead_spot.branch) == head


def test_a_conflict_is_merged_and_resolved_on_the_worker_then_fast_forwards(tmp_path: Path) -> None:
    lead, lead_spot, worker, spot = two_machines(tmp_path)
    GIT.create_from(str(worker), spot, remote=str(lead))
    Path(lead, "shared.txt").write_text("lead's line\n")
    git(lead, "commit", "-q", "-am", "the Lead edits")
    Path(spot.path, "shared.txt").write_text("member's line\n")
    GIT.commit_all(spot, "task-1: edit", author="m")
    GIT.push(spot, remote=str(lead))
    GIT.receive(str(lead), lead_spot)
    plan = GIT.plan_merge(str(lead), lead_spot, message="merge")
    assert plan.conflicts == ("shared.txt",)
    assert GIT.merge_from(spot, remote=str(lead), target=plan.target, author="m") == ("shared.txt",)
    assert "<<<<<<< " in Path(spot.path, "shared.txt").read_text()
    assert GIT.pending_merge(spot) == ("shared.txt",)
    Path(spot.path, "shared.txt").write_text("lead's line\nmember's line\n")
    assert GIT.pending_merge(spot) == ()
    concluded = GIT.commit_all(spot, "task-1: resolved", author="m")
    assert concluded is not None and len(git(spot.path, "rev-list", "--parents", "-n1", "HEAD").split()) == 3
    GIT.push(spot, remote=str(lead))
    assert GIT.receive(str(lead), lead_spot) == concluded
    plan = GIT.plan_merge(str(lead), lead_spot, message="merge")
    assert plan.fast_forward and plan.new == concluded
    assert GIT.move_ref(str(lead), plan)
    GIT.sync_checkout(str(lead), plan)
    assert Path(lead, "shared.txt").read_text() == "lead's line\nmember's line\n"


def test_a_clean_merge_from_the_lead_is_committed_on_the_worker(tmp_path: Path) -> None:
    lead, _, worker, spot = two_machines(tmp_path)
    GIT.create_from(str(worker), spot, remote=str(lead))
    Path(lead, "other.txt").write_text("lead\n")
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "the Lead adds a file")
    assert GIT.merge_from(spot, remote=str(lead), target="refs/heads/main", author="m") == ()
    assert Path(spot.path, "other.txt").read_text() == "lead\n"
    with pytest.raises(WorktreeError) as caught:
        GIT.merge_from(spot, remote=str(lead), target="refs/heads/nope", author="m")
    assert caught.value.code == WorktreeCode.GIT_FAILED


def test_a_second_worker_starts_from_the_head_the_first_one_pushed(tmp_path: Path) -> None:
    lead, _, worker, spot = two_machines(tmp_path)
    GIT.create_from(str(worker), spot, remote=str(lead))
    Path(spot.path, "work.txt").write_text("first worker\n")
    head = GIT.commit_all(spot, "w", author="m")
    GIT.push(spot, remote=str(lead))
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(lead), str(second))
    other = GIT.mirror(str(second), spot.path)
    assert other is not None
    assert GIT.create_from(str(second), other, remote=str(lead)) == head
    assert Path(other.path, "work.txt").read_text() == "first worker\n"


def test_a_local_branch_behind_the_lead_moves_one_ahead_stays_and_one_apart_is_kept_aside(tmp_path: Path) -> None:
    lead, lead_spot, worker, spot = two_machines(tmp_path)
    old = git(worker, "rev-parse", "HEAD")
    git(worker, "branch", spot.branch, old)  # behind: the Lead's branch moves on below
    Path(lead_spot.path, "n.txt").write_text("n\n")
    moved = GIT.commit_all(lead_spot, "n", author="m")
    assert moved is not None
    assert GIT.create_from(str(worker), spot, remote=str(lead)) == moved
    Path(spot.path, "more.txt").write_text("more\n")
    ahead = GIT.commit_all(spot, "more", author="m")
    git(worker, "worktree", "remove", "--force", spot.path)
    assert GIT.create_from(str(worker), spot, remote=str(lead)) == ahead  # ahead of the Lead's: its work stays
    GIT.remove(str(worker), spot, force=True)
    Path(worker, "apart.txt").write_text("a\n")
    git(worker, "add", "-A")
    git(worker, "commit", "-q", "-m", "apart, on main")
    apart = git(worker, "rev-parse", "HEAD")
    git(worker, "branch", spot.branch, apart)  # a branch of that name from an earlier run
    assert GIT.create_from(str(worker), spot, remote=str(lead)) == moved
    assert git(worker, "rev-parse", f"{KEPT}{spot.branch}") == apart


def test_removing_the_leads_worktree_drops_what_was_pushed_for_it(tmp_path: Path) -> None:
    lead, lead_spot, worker, spot = two_machines(tmp_path)
    GIT.create_from(str(worker), spot, remote=str(lead))
    GIT.push(spot, remote=str(lead))
    assert GIT.remove(str(lead), lead_spot)
    assert git(lead, "for-each-ref", PUSHED) == ""


def test_diverged_pushes_and_branches_are_refused(tmp_path: Path) -> None:
    lead, lead_spot, worker, spot = two_machines(tmp_path)
    GIT.create_from(str(worker), spot, remote=str(lead))
    Path(spot.path, "a.txt").write_text("a\n")
    GIT.commit_all(spot, "a", author="m")
    GIT.push(spot, remote=str(lead))
    git(spot.path, "reset", "-q", "--hard", "HEAD~1")
    Path(spot.path, "b.txt").write_text("b\n")
    GIT.commit_all(spot, "b", author="m")
    with pytest.raises(WorktreeError) as caught:
        GIT.push(spot, remote=str(lead))  # not a fast-forward of what was pushed before
    assert caught.value.code == WorktreeCode.GIT_FAILED
    Path(lead_spot.path, "c.txt").write_text("c\n")
    GIT.commit_all(lead_spot, "c", author="m")  # the Lead's side moved too
    with pytest.raises(WorktreeError) as caught:
        GIT.receive(str(lead), lead_spot)
    assert caught.value.code == WorktreeCode.GIT_FAILED and "by hand" in caught.value.message


def test_remotes_that_are_options_or_unreachable_fail_typed_without_the_password(tmp_path: Path) -> None:
    _, _, worker, spot = two_machines(tmp_path)
    with pytest.raises(WorktreeError) as caught:
        GIT.create_from(str(worker), spot, remote="--upload-pack=touch pwned")
    assert caught.value.code == WorktreeCode.UNAVAILABLE
    assert not Path(worker, "pwned").exists()
    with pytest.raises(WorktreeError) as caught:
        GIT.create_from(str(worker), spot, remote="http://user:s3cret@127.0.0.1:9/lead.git")
    assert caught.value.code == WorktreeCode.GIT_FAILED and "s3cret" not in caught.value.message
    (tmp_path / "empty").mkdir()
    with pytest.raises(WorktreeError) as caught:
        GIT.push(WorktreeSpot(path=str(tmp_path / "empty"), branch="dsh/t/none"), remote=str(worker))
    assert caught.value.code == WorktreeCode.GIT_FAILED
