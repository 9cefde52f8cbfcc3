"""The worktree contract: a member's own git worktree, and merging its branch back.

A coordination plugin (Agent Teams in ``worktree`` mode) gives each teammate its
own checkout: a ``git worktree`` on its own branch, created from the Lead's
current commit. The plugin never runs git itself -- it asks the host's
:class:`Worktrees` service (looked up by type, ``host.find_service(Worktrees)``)
and records the facts in its own log. The host keeps the git rules in one place:

* where a worktree lives (:meth:`Worktrees.place`: outside the main checkout's
  tracked tree, where git ignores it),
* how a member's changes become a commit on its branch (:meth:`Worktrees.commit_all`),
* how that branch is merged into the branch the Lead's checkout is on without
  touching the user's uncommitted work: the merge is computed in git's object
  store only (:meth:`Worktrees.plan_merge`: fast-forward when it can, else
  ``git merge-tree --write-tree`` and a merge commit), then the branch moves by a
  compare-and-set (:meth:`Worktrees.move_ref`) and the Lead's index and files
  follow (:meth:`Worktrees.sync_checkout`, git's two-tree merge: local changes in
  other paths are carried over, never lost).

When the plan conflicts, the member's worktree takes the Lead's branch instead
(:meth:`Worktrees.merge_lead`, a ``git merge`` run by the host in the member's
worktree, never in the user's checkout): the conflicted files hold git's markers,
the member resolves them by editing files -- its own commands never need git, whose
administrative files a sandboxed member cannot write -- and completing again
concludes that merge (:meth:`Worktrees.pending_merge` says which paths still hold
markers), so the next plan is a fast-forward.

Splitting the merge into a plan (objects only, nothing visible), a ref move (one
atomic compare-and-set) and a checkout sync (idempotent) is what lets the caller
make it a durable step: it records the plan's target commit first, and after a
crash :meth:`Worktrees.merge_applied` tells whether the ref already moved.

Across machines (:class:`RemoteWorktrees`, docs/distributed.md): a ``dsh worker``
runs a member's calls in a clone of the Lead's repository. It makes the member's
worktree there from the member's branch in the Lead's repository, pushes the
member's head back to it, and merges the Lead's branch into its worktree on a
conflict; the Lead's side takes the pushed head onto the member's branch
(:meth:`RemoteWorktrees.receive`) and merges as for a member on its own machine.

The methods block (they run git); an asyncio caller runs them in a thread.
"""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

import msgspec

from host_spec.errors import DshError

__all__ = [
    "WorktreeSpot", "MergePlan", "WorktreeState", "Worktrees", "RemoteWorktrees", "WorktreeCode", "WorktreeError",
]


class WorktreeSpot(msgspec.Struct, frozen=True):
    """Where one member's worktree lives and which branch it is on.

    Attributes:
        path: The worktree's absolute directory.
        branch: Its branch (``dsh/<team>/<member>``, without ``refs/heads/``).
    """

    path: str
    branch: str


class MergePlan(msgspec.Struct, frozen=True, omit_defaults=True):
    """A merge of a member's branch into the Lead's branch, computed but not applied.

    Attributes:
        target: The Lead's branch ref (``refs/heads/main``).
        old: The commit ``target`` points at now.
        new: The commit it will point at (``source`` for a fast-forward, else a merge
            commit already written to the object store); ``old`` when there is nothing to merge.
        source: The member's branch head.
        fast_forward: ``new`` is ``source`` (no merge commit).
        conflicts: Paths the two sides changed incompatibly; non-empty means ``new`` is ``old``.
        blocked: Why the Lead's checkout cannot take the merge now (local changes to a
            path the merge changes, a detached HEAD), ``None`` when it can.
    """

    target: str
    old: str
    new: str
    source: str
    fast_forward: bool = False
    conflicts: tuple[str, ...] = ()
    blocked: str | None = None

    @property
    def empty(self) -> bool:
        """Nothing to merge: the Lead's branch already contains the member's."""
        return self.new == self.old and not self.conflicts


class WorktreeState(msgspec.Struct, frozen=True, omit_defaults=True):
    """What is in one member's worktree now (``dsh team show``).

    Attributes:
        exists: The worktree directory is there.
        ahead: Commits on its branch the Lead's branch does not contain.
        dirty: Uncommitted changes in the worktree.
        branch_exists: The branch still exists.
    """

    exists: bool
    ahead: int = 0
    dirty: bool = False
    branch_exists: bool = False

    @property
    def merged(self) -> bool:
        """Nothing would be lost by removing it: no commit ahead, no uncommitted change."""
        return self.ahead == 0 and not self.dirty


@runtime_checkable
class Worktrees(Protocol):
    """Git worktrees of a checkout, and merges into the branch it is on (provided by the host)."""

    def place(self, root: str, *, team: str, member: str) -> WorktreeSpot:
        """Where ``member`` of ``team`` gets its worktree of the repository at ``root`` (nothing is created).

        Raises:
            WorktreeError: ``WORKTREE_UNAVAILABLE`` (``root`` is not in a git repository
                with at least one commit, or git is missing), the message naming the fix.
        """
        ...

    def create(self, root: str, spot: WorktreeSpot) -> str:
        """Create the worktree at ``spot`` on a new branch from ``root``'s HEAD; returns the base commit.

        Idempotent: an existing worktree at ``spot`` is kept, and a branch that exists
        already is checked out as it is (so a removed worktree comes back with its work).

        Raises:
            WorktreeError: ``WORKTREE_UNAVAILABLE``, ``WORKTREE_GIT_FAILED``.
        """
        ...

    def remove(self, root: str, spot: WorktreeSpot, *, force: bool = False) -> bool:
        """Remove the worktree and its branch; ``False`` (nothing removed) when it holds unmerged work.

        ``force`` removes it anyway. Idempotent: a worktree already gone is ``True``.

        Raises:
            WorktreeError: ``WORKTREE_GIT_FAILED``.
        """
        ...

    def commit_all(self, spot: WorktreeSpot, message: str, *, author: str) -> str | None:
        """Commit every change in the worktree (new files included) on its branch; the new commit or ``None``.

        Raises:
            WorktreeError: ``WORKTREE_GIT_FAILED`` (for instance the worktree is mid-rebase).
        """
        ...

    def plan_merge(self, root: str, spot: WorktreeSpot, *, message: str) -> MergePlan:
        """Compute the merge of ``spot``'s branch into the branch ``root`` is on (objects only).

        Raises:
            WorktreeError: ``WORKTREE_GIT_FAILED``.
        """
        ...

    def merge_lead(self, root: str, spot: WorktreeSpot, *, author: str) -> tuple[str, ...]:
        """Merge the branch ``root`` is on into ``spot``'s worktree (after :meth:`commit_all`); the conflicted paths.

        ``()``: the merge was clean and is committed on the member's branch. Otherwise
        the merge stays in progress in the worktree, each conflicted file holding git's
        conflict markers, until :meth:`commit_all` concludes it.

        Raises:
            WorktreeError: ``WORKTREE_GIT_FAILED`` (for instance uncommitted changes in the worktree).
        """
        ...

    def pending_merge(self, spot: WorktreeSpot) -> tuple[str, ...] | None:
        """The paths of ``spot``'s in-progress merge whose files still hold conflict markers.

        ``None``: no merge is in progress; ``()``: one is, and every conflict is resolved
        (the next :meth:`commit_all` concludes it).
        """
        ...

    def move_ref(self, root: str, plan: MergePlan) -> bool:
        """Move ``plan.target`` from ``plan.old`` to ``plan.new`` atomically; ``False`` when it is no longer at ``old``.

        Raises:
            WorktreeError: ``WORKTREE_GIT_FAILED``.
        """
        ...

    def sync_checkout(self, root: str, plan: MergePlan) -> None:
        """Bring ``root``'s index and files from ``plan.old`` to ``plan.new`` (idempotent; local changes kept).

        Raises:
            WorktreeError: ``WORKTREE_GIT_FAILED`` (a local change now stands in the way).
        """
        ...

    def merge_applied(self, root: str, plan: MergePlan) -> bool:
        """Whether ``plan.target`` contains ``plan.new`` (the ref moved, or moved on past it)."""
        ...

    def state(self, root: str, spot: WorktreeSpot) -> WorktreeState:
        """The worktree's state against the branch ``root`` is on (never raises for a missing worktree)."""
        ...

    def diff(self, root: str, spot: WorktreeSpot) -> str:
        """What merging ``spot`` would change: its branch against the merge base, then its uncommitted changes.

        Raises:
            WorktreeError: ``WORKTREE_GIT_FAILED``.
        """
        ...


@runtime_checkable
class RemoteWorktrees(Protocol):
    """Members' worktrees in a clone of the Lead's repository on another machine.

    The reference host's :class:`Worktrees` service implements it too (check with
    ``isinstance``); its ``dsh worker`` and the Lead's side of placement use it.

    ``remote`` is how this clone reaches the Lead's repository: a URL, a path, or a
    remote's name (``origin``). Pushes never touch the Lead's ``refs/heads``: the
    member's head lands beside its branch, and the Lead's side takes it from there.
    """

    def mirror(self, root: str, lead_path: str) -> WorktreeSpot | None:
        """Where the member whose worktree is ``lead_path`` in the Lead's repository works in ``root``.

        ``None``: ``lead_path`` is no member's worktree (a member in ``shared`` mode).

        Raises:
            WorktreeError: ``WORKTREE_UNAVAILABLE`` (``root`` is no git repository with a commit).
        """
        ...

    def create_from(self, root: str, spot: WorktreeSpot, *, remote: str) -> str:
        """Create ``spot`` in ``root`` from the member's branch in the Lead's repository; returns its head.

        The newest of the Lead's branch and a head pushed for it earlier is the start;
        an existing worktree is kept as it is (it holds the member's work here).

        Raises:
            WorktreeError: ``WORKTREE_UNAVAILABLE`` (the Lead's repository has no such
                branch), ``WORKTREE_GIT_FAILED`` (the fetch failed).
        """
        ...

    def push(self, spot: WorktreeSpot, *, remote: str) -> str:
        """Push ``spot``'s head (commit first: :meth:`Worktrees.commit_all`) to the Lead's repository; returns it.

        Raises:
            WorktreeError: ``WORKTREE_GIT_FAILED`` (refused: the pushed head moved apart).
        """
        ...

    def merge_from(self, spot: WorktreeSpot, *, remote: str, target: str, author: str) -> tuple[str, ...]:
        """:meth:`Worktrees.merge_lead` with the Lead's branch ``target`` fetched from the Lead's repository.

        Raises:
            WorktreeError: ``WORKTREE_GIT_FAILED``.
        """
        ...

    def receive(self, root: str, spot: WorktreeSpot) -> str | None:
        """In the Lead's repository: fast-forward ``spot``'s branch (and its worktree) to the head a worker pushed.

        Returns the new head, ``None`` when nothing was pushed or the branch has it
        already (idempotent).

        Raises:
            WorktreeError: ``WORKTREE_GIT_FAILED`` (the branch moved apart from the
                pushed head, or the worktree's local changes stand in the way).
        """
        ...


class WorktreeCode:
    """Stable codes of :class:`WorktreeError` (docs/error-codes.md lists what each means)."""

    UNAVAILABLE: Final = "WORKTREE_UNAVAILABLE"
    GIT_FAILED: Final = "WORKTREE_GIT_FAILED"


class WorktreeError(DshError):
    """A worktree operation could not be done; the message names git's answer or the fix."""

    code = "WORKTREE_ERROR"
