"""Worktree mode: a member's checks run in its own worktree; work left unmerged stays and is shown.

* Both tasks are gated by the Team's ``on_complete`` check ``test ! -e broken.flag``.
  Alice writes ``broken.flag`` in her worktree and completes: her check fails
  (``TEAM_TASK_CHECK_FAILED``), her task stays ``in_progress``. Bob, in his own
  worktree, completes and passes -- in a shared checkout Alice's flag would fail him
  too. Alice then removes the flag and completes: it passes and merges.
* A member that never completes keeps its worktree at the end of the run; ``dsh team
  show`` lists it as remaining with its commits ahead, ``dsh team diff`` prints its work.
* A workspace that is not a git repository refuses the spawn with
  ``TEAM_WORKTREE_UNAVAILABLE`` naming ``git init``; nothing is written.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dsh_team.core.fold import replay
from host_spec.host.cli.main import main
from host_spec.host.store.jsonl import JsonlStore
from wt_kit import git, lead_events, make_repo, records, run_team, write_profile, write_script

pytestmark = pytest.mark.timeout_s(120)

def _step(text: str, *calls: dict[str, Any], when: str | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"text": text, "tool_calls": list(calls)}
    if when is not None:
        step["when"] = when
    return step


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def _lead(*names: str) -> list[dict[str, Any]]:
    calls = [_call("team_task_create", subject=f"{name}'s task", description="d") for name in names]
    calls += [_call("spawn_teammate", name=name, description=name, prompt=f"task-{i + 1}")
              for i, name in enumerate(names)]
    return [_step("plan", *calls), {"text": "waiting"}]


ISOLATION = {
    "lead": _lead("alice", "bob"),
    "alice": [
        _step("break my checkout", _call("team_task_update", task_id="task-1", expected_revision=1, action="claim"),
              _call("write_file", path="broken.flag", content="x"), _call("write_file", path="alice.txt", content="a"),
              _call("team_task_update", task_id="task-1", expected_revision=2, action="complete")),
        _step("fix it", _call("bash", command="rm broken.flag"),
              _call("team_task_update", task_id="task-1", expected_revision=2, action="complete"),
              when="stays in_progress: check"),
        {"text": "done"},
    ],
    "bob": [
        _step("work", _call("team_task_update", task_id="task-2", expected_revision=1, action="claim"),
              _call("write_file", path="bob.txt", content="b"),
              _call("team_task_update", task_id="task-2", expected_revision=2, action="complete")),
        {"text": "done"},
    ],
}  # fmt: skip


def _results(data: Path, session_id: str) -> list[dict[str, Any]]:
    return [e.value() for e in JsonlStore(data).read(session_id)[1] if e.type == "tool/result"]


async def test_a_failing_check_in_one_worktree_does_not_fail_another(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    data = tmp_path / "data"
    profile = write_profile(tmp_path, extra='[plugins.dsh-team.gates]\non_complete = ["test ! -e broken.flag"]')
    lead_id = await run_team(data, repo, write_script(tmp_path, ISOLATION), profile)
    state = replay(lead_events(data, lead_id), lead_id)
    assert {t.id: t.status for t in state.tasks.tasks.values()} == {"task-1": "completed", "task-2": "completed"}
    ids = {m.name: m.id for m in state.members.listed()}
    alice = [r.get("error", {}).get("code") for r in _results(data, ids["alice"]) if r["name"] == "team_task_update"]
    bob = [r.get("error", {}).get("code") for r in _results(data, ids["bob"]) if r["name"] == "team_task_update"]
    assert alice == [None, "TEAM_TASK_CHECK_FAILED", None]
    assert bob == [None, None]  # bob's check ran in bob's worktree, where no flag exists
    finished = records(data, lead_id, "team/check/finished")
    assert sorted(r["passed"] for r in finished) == [False, True, True]
    # both merged; the flag never reached main
    assert (repo / "alice.txt").read_text() == "a" and (repo / "bob.txt").read_text() == "b"
    assert not (repo / "broken.flag").exists()
    assert "broken.flag" not in git(repo, "log", "--all", "--name-only", "--format=", "main")


LEFT = {
    "lead": _lead("carol"),
    "carol": [
        _step("work without completing", _call("team_task_update", task_id="task-1", expected_revision=1,
                                                 action="claim"),
              _call("write_file", path="carol.txt", content="unfinished\n")),
        {"text": "stopping here"},
    ],
}  # fmt: skip


def test_unmerged_work_remains_and_show_and_diff_report_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path / "repo")
    data = tmp_path / "data"
    lead_id = asyncio.run(run_team(data, repo, write_script(tmp_path, LEFT), write_profile(tmp_path)))
    spot = repo / ".git" / "dsh-worktrees" / lead_id / "carol"
    assert (spot / "carol.txt").read_text() == "unfinished\n"  # kept: its work is not merged
    assert not (repo / "carol.txt").exists()
    capsys.readouterr()  # the run's own log lines
    assert main(["team", "show", "--data-dir", str(data), "--json"]) == 0
    section = json.loads(capsys.readouterr().out)["worktrees"]
    assert section["remaining"] == 1 and section["merges"] == []
    assert section["worktrees"] == [{"member": "carol", "member_id": section["worktrees"][0]["member_id"],
                                     "branch": f"dsh/{lead_id}/carol", "path": str(spot.resolve()),
                                     "exists": True, "ahead": 0, "dirty": True}]
    assert main(["team", "show", "--data-dir", str(data)]) == 0
    text = capsys.readouterr().out
    assert f"carol: dsh/{lead_id}/carol -- " in text and "uncommitted changes" in text and "1 worktree(s) remain" in text
    assert main(["team", "diff", "--data-dir", str(data), "carol"]) == 0
    diff = capsys.readouterr().out
    assert "+unfinished" in diff and "carol.txt" in diff
    assert main(["team", "diff", "--data-dir", str(data), "dave"]) == 2
    assert "TEAM_NO_WORKTREE" in capsys.readouterr().err
    # committed work is shown ahead, and the CLI's diff of the branch still shows it
    git(spot, "add", "-A")
    git(spot, "commit", "-q", "-m", "carol's commit")
    assert main(["team", "show", "--data-dir", str(data)]) == 0
    assert "(1 commit(s) ahead)" in capsys.readouterr().out
    assert main(["team", "diff", "--data-dir", str(data), "carol"]) == 0
    assert "+unfinished" in capsys.readouterr().out
    git(repo, "worktree", "remove", "--force", str(spot))  # removed: the branch is still ahead
    assert main(["team", "show", "--data-dir", str(data)]) == 0
    assert "removed (1 commit(s) ahead)" in capsys.readouterr().out
    git(repo, "branch", "-D", f"dsh/{lead_id}/carol")
    assert main(["team", "show", "--data-dir", str(data)]) == 0
    assert "removed (merged)" in capsys.readouterr().out
    assert main(["team", "diff", "--data-dir", str(data), "carol"]) == 0
    assert "nothing to merge" in capsys.readouterr().out


NOT_GIT = {"lead": [_step("spawn", _call("spawn_teammate", name="erin", description="e", prompt="p")),
                    {"text": "done"}]}


async def test_a_workspace_that_is_no_repository_refuses_the_spawn(tmp_path: Path) -> None:
    workspace = tmp_path / "plain"
    workspace.mkdir()
    data = tmp_path / "data"
    lead_id = await run_team(data, workspace, write_script(tmp_path, NOT_GIT), write_profile(tmp_path))
    results = _results(data, lead_id)
    spawn = [r for r in results if r["name"] == "spawn_teammate"]
    assert spawn[0]["error"]["code"] == "TEAM_WORKTREE_UNAVAILABLE" and "git init" in spawn[0]["error"]["message"]
    assert records(data, lead_id, "team/member") == [] and records(data, lead_id, "team/worktree") == []
    assert not (workspace / ".git").exists()
