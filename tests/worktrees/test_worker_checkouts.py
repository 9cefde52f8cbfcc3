"""A worker's places for members, and a completion's git steps there (real git: the Lead's repository and a clone).

:class:`WorkerCheckouts` is what ``dsh worker --workspace CLONE --lead-repo LEAD``
runs for each member; here it is driven directly with the same JSON steps the
Lead posts (:class:`~host_spec.host.placement.wire.WorktreeOp`).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.placement.checkouts import DEFAULT_LEAD_REPO, WorkerCheckouts
from host_spec.host.placement.wire import WorktreeOp
from host_spec.host.worktrees.git import PUSHED, GitWorktrees
from host_spec.lifetime import AbortSignal

from wt_kit import git, make_repo

GIT = GitWorktrees()


def setup(tmp_path: Path) -> tuple[Path, str, Path, WorkerCheckouts]:
    lead = make_repo(tmp_path / "lead")
    spot = GIT.place(str(lead), team="session-1", member="m")
    GIT.create(str(lead), spot)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(lead), str(clone))
    return lead, spot.path, clone, WorkerCheckouts(str(clone), str(lead))


def step(checkouts: WorkerCheckouts, op: str, path: str, **fields: str) -> dict[str, object]:
    return checkouts.run(msgspec.json.encode(WorktreeOp(op=op, path=path, **fields)).decode())


def test_a_worktree_member_works_in_its_own_worktree_of_the_clone(tmp_path: Path) -> None:
    lead, recorded, clone, checkouts = setup(tmp_path)
    here = checkouts.cwd_for(recorded)
    assert here == str((clone / ".git" / "dsh-worktrees" / "session-1" / "m").resolve())
    assert git(here, "rev-parse", "--abbrev-ref", "HEAD") == "dsh/session-1/m"
    assert checkouts.cwd_for(str(lead)) == str(clone)  # a shared-mode member: the clone itself
    assert checkouts.cwd_for(None) == str(clone)
    second = GIT.place(str(lead), team="session-1", member="m2")
    GIT.create(str(lead), second)
    by_origin = WorkerCheckouts(str(clone), DEFAULT_LEAD_REPO)  # the clone's origin: the Lead's repository
    there = by_origin.cwd_for(second.path)
    assert there is not None and git(there, "rev-parse", "--abbrev-ref", "HEAD") == "dsh/session-1/m2"


def test_without_a_workspace_everything_stays_where_it_is_recorded(tmp_path: Path) -> None:
    _, recorded, _, _ = setup(tmp_path)
    same_machine = WorkerCheckouts(None, "origin")
    assert same_machine.cwd_for(recorded) == recorded
    assert step(same_machine, "pending", recorded) == {"local": True}


def test_a_shared_mode_path_is_the_leads_to_do(tmp_path: Path) -> None:
    lead, _, _, checkouts = setup(tmp_path)
    assert step(checkouts, "commit", str(lead)) == {"local": True}


def test_commit_pushes_the_head_and_a_conflict_is_merged_in_here(tmp_path: Path) -> None:
    lead, recorded, _, checkouts = setup(tmp_path)
    here = Path(str(checkouts.cwd_for(recorded)))
    (here / "shared.txt").write_text("member\n")
    assert step(checkouts, "pending", recorded) == {"pending": None}
    answer = step(checkouts, "commit", recorded, message="task-1: edit", author="m")
    assert answer == {"head": git(here, "rev-parse", "HEAD")}
    assert git(lead, "rev-parse", f"{PUSHED}dsh/session-1/m") == answer["head"]
    assert git(here, "log", "-1", "--format=%an|%s") == "m (dsh)|task-1: edit"
    (lead / "shared.txt").write_text("lead\n")
    git(lead, "commit", "-q", "-am", "lead")
    assert step(checkouts, "merge", recorded, target="refs/heads/main", author="m") == {"conflicts": ["shared.txt"]}
    assert step(checkouts, "pending", recorded) == {"pending": ["shared.txt"]}
    (here / "shared.txt").write_text("both\n")
    assert step(checkouts, "pending", recorded) == {"pending": []}
    concluded = step(checkouts, "commit", recorded, message="task-1: again", author="m")
    assert git(lead, "rev-parse", f"{PUSHED}dsh/session-1/m") == concluded["head"]


def test_failures_are_answers_with_their_code(tmp_path: Path) -> None:
    lead, recorded, clone, checkouts = setup(tmp_path)
    wrong = WorkerCheckouts(str(clone), str(tmp_path / "no-such-repo"))
    failed = wrong.run(msgspec.json.encode(WorktreeOp(op="pending", path=recorded)).decode())
    assert failed["error"]["code"] == "WORKTREE_GIT_FAILED"  # type: ignore[index]
    unknown = step(checkouts, "rebase", recorded)
    assert unknown["error"] == {"code": "WORKTREE_GIT_FAILED", "message": "no worktree step 'rebase'"}
    unreadable = checkouts.run("{not json")
    assert unreadable["error"]["code"] == "WORKTREE_GIT_FAILED"  # type: ignore[index]
    missing = step(checkouts, "pending", recorded.replace("/m", "/nobody"))
    assert missing["error"]["code"] == "WORKTREE_UNAVAILABLE"  # type: ignore[index]
    assert "--lead-repo" in missing["error"]["message"]  # type: ignore[index]


async def test_a_check_runs_in_the_members_worktree_here_through_the_hosts_runner(tmp_path: Path) -> None:
    _, recorded, clone, checkouts = setup(tmp_path)
    host = await Host.open(None, "headless", ScriptedModel.from_mapping({}))
    bare = await Host.open(None, None, ScriptedModel.from_mapping({}))  # no workspace plugin: no runner
    try:
        check = msgspec.json.encode(WorktreeOp(op="check", path=recorded, command="pwd; exit 3",
                                               timeout_ms=20_000, author="m")).decode()
        answer = await checkouts.answer(host, check, AbortSignal())
        outcome = answer["outcome"]
        assert outcome["exit_code"] == 3  # type: ignore[index]
        worktree = clone.resolve() / ".git" / "dsh-worktrees" / "session-1" / "m"
        assert outcome["output"].strip() == str(worktree)  # type: ignore[index]
        assert await checkouts.answer(bare, check, AbortSignal()) == {"local": True}
        pending = msgspec.json.encode(WorktreeOp(op="pending", path=recorded)).decode()
        assert await checkouts.answer(host, pending, AbortSignal()) == {"pending": None}
        assert (await checkouts.answer(host, "{not json", AbortSignal()))["error"]
        wrong = WorkerCheckouts(str(tmp_path / "clone"), str(tmp_path / "no-such-repo"))
        lost = recorded.replace("/m", "/other")
        failed = await wrong.answer(host, check.replace(recorded, lost), AbortSignal())
        assert failed["error"]["code"] == "WORKTREE_GIT_FAILED"  # type: ignore[index]
    finally:
        await bare.close()
        await host.close()
