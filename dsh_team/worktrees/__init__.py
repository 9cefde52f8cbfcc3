"""Members' own git worktrees (``workspace_mode = "worktree"``) and the merge of their work on completion.

Modules: :mod:`.records` (``team/worktree`` and ``team/merge``), :mod:`.room`
(where a member works: created at spawn, found or recreated on start, removed at
the end), :mod:`.merge` (commit, merge and complete as one durable step, and its
recovery), :mod:`.report` (the worktree section of ``dsh team show`` and the web panel).
"""

from dsh_team.worktrees.merge import MergeBook, Merges
from dsh_team.worktrees.records import TEAM_MERGE, TEAM_WORKTREE, MergeRecord, WorktreeRecord
from dsh_team.worktrees.room import MemberWorktrees, WorktreeBook

__all__ = [
    "MergeBook", "Merges", "TEAM_MERGE", "TEAM_WORKTREE", "MergeRecord", "WorktreeRecord", "MemberWorktrees",
    "WorktreeBook",
]
