"""The worktree section of ``dsh team show``, folded from Lead-log events (pure, no git asked here).

Records another Team wrote (a fork's inherited prefix) and records nothing vetted
(written without the invariant) are left out rather than guessed at; without a
host's git the section still lists what the log recorded.
"""

from __future__ import annotations

import msgspec

from dsh_team.worktrees.records import TEAM_MERGE, TEAM_WORKTREE, WORKTREE_VERSION, MergeRecord, WorktreeRecord
from dsh_team.worktrees.report import build_worktrees, recorded_worktrees, render_worktrees
from host_spec.events import Event


def _event(seq: int, kind: str, payload: object) -> Event:
    data = payload if isinstance(payload, bytes) else msgspec.json.encode(payload)
    return Event(seq=seq, time=seq, type=kind, data=msgspec.Raw(data))


def _worktree(team: str, member: str) -> WorktreeRecord:
    return WorktreeRecord(version=WORKTREE_VERSION, team_id=team, member_id=f"id-{member}", member=member,
                          root="/repo", path=f"/repo/.git/dsh-worktrees/{team}/{member}", branch=f"dsh/{team}/{member}")


def _merge(team: str, merge_id: str, phase: str, fast: bool) -> MergeRecord:
    return MergeRecord(version=WORKTREE_VERSION, team_id=team, member_id="id-ann", merge_id=merge_id, phase=phase,
                       task_id="task-1", revision=2, member="ann", target="refs/heads/main", old="a" * 40,
                       new="b" * 40, source="c" * 40, fast_forward=fast)  # type: ignore[arg-type]


EVENTS = [
    _event(1, TEAM_WORKTREE, _worktree("t", "ann")),
    _event(2, TEAM_WORKTREE, _worktree("other-team", "bo")),  # inherited by a fork: not this Team's
    _event(3, TEAM_WORKTREE, b'{"version": 1}'),  # unreadable: skipped
    _event(4, TEAM_MERGE, _merge("t", "m-1", "intent", False)),
    _event(5, TEAM_MERGE, b"[]"),
    _event(6, TEAM_MERGE, _merge("other-team", "m-9", "intent", True)),
    _event(7, TEAM_MERGE, _merge("t", "m-1", "done", False)),
    _event(8, TEAM_MERGE, _merge("t", "m-2", "intent", True)),
]


def test_only_this_teams_readable_records_are_folded() -> None:
    assert list(recorded_worktrees(EVENTS, "t")) == ["id-ann"]
    report = build_worktrees(EVENTS, "t", lambda: None)
    assert report is not None
    assert [(m.phase, m.fast_forward, m.seq) for m in report.merges] == [("done", False, 7), ("intent", True, 8)]
    assert report.remaining is None and report.worktrees[0].exists is None  # git was not asked


def test_without_git_the_text_lists_what_the_log_recorded() -> None:
    report = build_worktrees(EVENTS, "t", lambda: None)
    assert report is not None
    lines = render_worktrees(report)
    assert lines[1] == "  ann: dsh/t/ann -- /repo/.git/dsh-worktrees/t/ann"
    assert lines[2] == "  merge of task-1 by ann: done (merge commit aaaaaaaaaa..bbbbbbbbbb on main)"
    assert lines[3].endswith("intent (fast-forward aaaaaaaaaa..bbbbbbbbbb on main)")


def test_a_team_without_worktrees_has_no_section_and_git_is_not_asked() -> None:
    asked: list[bool] = []
    assert build_worktrees(EVENTS[3:], "t", lambda: asked.append(True)) is None  # type: ignore[func-returns-value]
    assert asked == []
