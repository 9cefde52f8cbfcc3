"""The worktree side records: ``team/worktree`` (a member's checkout) and ``team/merge`` (one merge of its branch).

Both are records of the Lead log that the Team fold does not read, folded beside
it per member like a role (:class:`~dsh_team.log.member_records.MemberRecords`):
what the rooms need is each member's latest one. They are vetted before they may
enter a log by the same decoder (:mod:`dsh_team.roster.vetting`).

``team/worktree`` is appended in the same serialized section as the member's
``provisioning`` record, *before* ``git worktree add`` runs: the place is known
(it is a pure function of the repository, the Team and the name), so a crash at
any point of the creation leaves a record that names what recovery must find or
remove -- never a worktree nobody knows about.

``team/merge`` is written twice per merge: ``intent`` (with the commit the Lead's
branch is at, ``old``, and the commit it will point at, ``new``, already in git's
object store) before the branch moves, then ``done`` -- or ``abandoned`` when the
branch never moved. After a crash the branch itself says which one is true.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from dsh_team.core.snapshots import NonEmpty, SafeCount
from dsh_team.log.member_records import RecordKind

__all__ = [
    "TEAM_WORKTREE", "TEAM_MERGE", "WORKTREE_VERSION", "WorktreeRecord", "MergeRecord", "MergePhase",
    "WORKTREE_RECORDS", "MERGE_RECORDS",
]

TEAM_WORKTREE: Final = "team/worktree"
TEAM_MERGE: Final = "team/merge"
WORKTREE_VERSION: Final = 1

MergePhase = Literal["intent", "done", "abandoned"]


class WorktreeRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Payload of ``team/worktree``: where a member works and on which branch.

    Attributes:
        member: The member's name (the branch and the commits name it).
        root: The Lead's checkout, which the branch merges into.
        path: The worktree directory (the member's workspace root).
        branch: The member's branch (``dsh/<team>/<member>``).
    """

    version: SafeCount
    team_id: NonEmpty
    member_id: NonEmpty
    member: NonEmpty
    root: NonEmpty
    path: NonEmpty
    branch: NonEmpty


class MergeRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Payload of ``team/merge``: one step of merging a member's branch when its task completes.

    Attributes:
        merge_id: Names the merge across its records.
        phase: ``intent`` (before the branch moves), ``done`` or ``abandoned``.
        task_id, revision: The completion it belongs to (the task's revision then).
        member: The member's name.
        target: The Lead's branch ref.
        old, new: The commit ``target`` was at and the one it moves to.
        source: The member's branch head that is merged.
        fast_forward: ``new`` is ``source``.
    """

    version: SafeCount
    team_id: NonEmpty
    member_id: NonEmpty
    merge_id: NonEmpty
    phase: MergePhase
    task_id: NonEmpty
    revision: SafeCount
    member: NonEmpty
    target: NonEmpty
    old: NonEmpty
    new: NonEmpty
    source: NonEmpty
    fast_forward: bool = False


#: The side record kinds (decoder and version), shared by the books and the invariant's vetting.
WORKTREE_RECORDS: Final = RecordKind(TEAM_WORKTREE, WorktreeRecord, WORKTREE_VERSION)
MERGE_RECORDS: Final = RecordKind(TEAM_MERGE, MergeRecord, WORKTREE_VERSION)
