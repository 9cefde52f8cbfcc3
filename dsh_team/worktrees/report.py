"""The worktree section of ``dsh team show`` and the web panel: branches, commits ahead, what remains, merges.

Folded from the Lead log's ``team/worktree`` and ``team/merge`` records; what is
on disk *now* (does the worktree exist, how many commits its branch is ahead of
the Lead's, uncommitted changes) is asked of the host's git
(:class:`host_spec.worktrees.Worktrees`) when one is given. After a clean end
every merged worktree is gone; after a crash, or with work left, the worktrees
that remain are listed with ``exists: true`` (``remaining`` counts them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import msgspec

from dsh_team.worktrees.records import MERGE_RECORDS, TEAM_MERGE, TEAM_WORKTREE, WORKTREE_RECORDS, WorktreeRecord
from dsh_team.worktrees.room import spot_of

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.worktrees import Worktrees

__all__ = ["WorktreeRow", "MergeRow", "WorktreeReport", "build_worktrees", "render_worktrees", "recorded_worktrees"]


class WorktreeRow(msgspec.Struct, frozen=True):
    """One member's worktree.

    Attributes:
        member, member_id, branch, path: As recorded.
        exists: The directory is there now (``null``: git was not asked).
        ahead: Commits on its branch the Lead's branch does not contain (``null``: not asked).
        dirty: Uncommitted changes in it (``null``: not asked).
    """

    member: str
    member_id: str
    branch: str
    path: str
    exists: bool | None = None
    ahead: int | None = None
    dirty: bool | None = None


class MergeRow(msgspec.Struct, frozen=True):
    """One merge (its latest record): ``intent`` (open), ``done`` or ``abandoned``."""

    seq: int
    member: str
    task_id: str
    phase: str
    target: str
    old: str
    new: str
    fast_forward: bool


class WorktreeReport(msgspec.Struct, frozen=True):
    """The section: every member's worktree, every merge, and how many worktrees remain on disk."""

    worktrees: tuple[WorktreeRow, ...]
    merges: tuple[MergeRow, ...]
    remaining: int | None


def recorded_worktrees(events: Iterable[Event], team_id: str) -> dict[str, WorktreeRecord]:
    """Member id -> its ``team/worktree`` record, from a Lead log's events (unreadable ones skipped)."""
    found: dict[str, WorktreeRecord] = {}
    for event in events:
        if event.type == TEAM_WORKTREE:
            try:
                record = WORKTREE_RECORDS.decode(event)
            except msgspec.DecodeError:
                continue
            if record.team_id == team_id:
                found[record.member_id] = record
    return found


def build_worktrees(
    events: Iterable[Event], team_id: str, git_of: Callable[[], Worktrees | None]
) -> WorktreeReport | None:
    """The section from a Lead log's events (``None``: the Team never used worktrees).

    ``git_of`` is asked for the host's git only when the Team had worktrees.
    """
    listed = list(events)
    records = recorded_worktrees(listed, team_id)
    if not records:
        return None
    git = git_of()
    merges: dict[str, MergeRow] = {}
    for event in listed:
        if event.type == TEAM_MERGE:
            try:
                merge = MERGE_RECORDS.decode(event)
            except msgspec.DecodeError:
                continue
            if merge.team_id == team_id:
                merges.pop(merge.merge_id, None)  # the latest phase, in the order the merges began
                merges[merge.merge_id] = MergeRow(
                    seq=event.seq, member=merge.member, task_id=merge.task_id, phase=merge.phase,
                    target=merge.target, old=merge.old, new=merge.new, fast_forward=merge.fast_forward)
    rows = []
    for record in records.values():
        row = WorktreeRow(member=record.member, member_id=record.member_id, branch=record.branch, path=record.path)
        if git is not None:
            state = git.state(record.root, spot_of(record))
            row = msgspec.structs.replace(row, exists=state.exists, ahead=state.ahead, dirty=state.dirty)
        rows.append(row)
    remaining = sum(1 for row in rows if row.exists) if git is not None else None
    ordered = tuple(sorted(merges.values(), key=lambda row: row.seq))
    return WorktreeReport(worktrees=tuple(rows), merges=ordered, remaining=remaining)


def render_worktrees(report: WorktreeReport) -> list[str]:
    """The text block: one line per worktree, one per merge."""
    lines = ["Worktrees:"]
    for row in report.worktrees:
        if row.exists is None:
            where = row.path
        elif row.exists:
            dirty = ", uncommitted changes" if row.dirty else ""
            where = f"{row.path} ({row.ahead} commit(s) ahead{dirty})"
        else:
            where = f"removed ({row.ahead} commit(s) ahead)" if row.ahead else "removed (merged)"
        lines.append(f"  {row.member}: {row.branch} -- {where}")
    if report.remaining:
        lines.append(f"  {report.remaining} worktree(s) remain on disk (`dsh team diff MEMBER` shows their work)")
    for merge in report.merges:
        how = "fast-forward" if merge.fast_forward else "merge commit"
        lines.append(f"  merge of {merge.task_id} by {merge.member}: {merge.phase} ({how} "
                     f"{merge.old[:10]}..{merge.new[:10]} on {merge.target.removeprefix('refs/heads/')})")
    return lines
