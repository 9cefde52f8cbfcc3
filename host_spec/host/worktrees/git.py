"""The host's :class:`~host_spec.worktrees.Worktrees`: members' git worktrees and merges, by the git CLI.

Where: ``<git common dir>/dsh-worktrees/<team>/<member>`` -- inside the
repository's ``.git`` directory, so it is never part of the main checkout's
tracked tree, git never shows it as untracked, and it needs no ignore rule; it
goes away with the repository. The branch is ``dsh/<team>/<member>``.

The merge never runs ``git merge`` in the user's checkout: the result is computed
in the object store (a fast-forward, or ``git merge-tree --write-tree`` and
``git commit-tree``: git 2.38 or later), the branch moves by ``git update-ref NEW
OLD`` (a compare-and-set), and the checkout follows by ``git read-tree -m -u OLD
NEW`` -- the two-tree merge ``git checkout`` uses to switch branches, which keeps
the user's uncommitted changes in the paths the merge does not touch and refuses
(checked beforehand with ``-n``) when one would be overwritten.

Commits made here carry a fixed identity (``<member> (dsh)``), so they work in a
repository without ``user.name`` and say who made them. Git runs with a cleaned
environment: no credential reaches it, and it never prompts.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import structlog

from host_spec.worktrees import MergePlan, WorktreeCode, WorktreeError, WorktreeSpot, WorktreeState

from host_spec.host.sandbox.service import host_environment

__all__ = ["GitWorktrees", "FOLDER"]

log = structlog.get_logger(__name__)

#: The folder of the members' worktrees inside the repository's common git directory.
FOLDER: Final = "dsh-worktrees"
_LEAD: Final = "dsh"


class _Git:
    """One git invocation's result."""

    __slots__ = ("code", "out", "err")

    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


def _identity(name: str) -> dict[str, str]:
    email = f"{name}@dsh.invalid"
    return {"GIT_AUTHOR_NAME": f"{name} (dsh)", "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": f"{name} (dsh)", "GIT_COMMITTER_EMAIL": email}


def _has_markers(path: Path) -> bool:
    """Whether ``path`` still holds a line git writes around a conflict (a deleted file holds none)."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return False
    return any(line.startswith((b"<<<<<<< ", b">>>>>>> ")) for line in lines)


class GitWorktrees:
    """Worktrees and merges of any repository, through the ``git`` command (stateless)."""

    def __init__(self, git: str = "git", environ: Mapping[str, str] | None = None) -> None:
        self.git = git
        env = host_environment(os.environ if environ is None else environ)
        env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
        for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):  # a parent's git context must not leak in
            env.pop(name, None)
        self._env = env

    # ------------------------------------------------------------ running git

    def _run(self, cwd: str, *args: str, env: Mapping[str, str] | None = None) -> _Git:
        try:
            done = subprocess.run(
                [self.git, *args], cwd=cwd, capture_output=True, text=True, env={**self._env, **(env or {})},
                stdin=subprocess.DEVNULL, check=False,
            )
        except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
            raise WorktreeError(f"cannot run git in {cwd}: {exc}", code=WorktreeCode.UNAVAILABLE) from None
        return _Git(done.returncode, done.stdout.strip(), done.stderr.strip())

    def _ok(self, cwd: str, *args: str, env: Mapping[str, str] | None = None) -> str:
        result = self._run(cwd, *args, env=env)
        if result.code != 0:
            raise WorktreeError(f"git {' '.join(args[:2])} failed: {result.err or result.out}",
                                code=WorktreeCode.GIT_FAILED)
        return result.out

    def _commit_of(self, cwd: str, ref: str) -> str | None:
        result = self._run(cwd, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
        return result.out if result.code == 0 else None

    def _is_ancestor(self, cwd: str, ancestor: str, descendant: str) -> bool:
        return self._run(cwd, "merge-base", "--is-ancestor", ancestor, descendant).code == 0

    def _target(self, root: str) -> str | None:
        """The branch ref ``root``'s checkout is on (``None``: a detached HEAD)."""
        result = self._run(root, "symbolic-ref", "-q", "HEAD")
        return result.out if result.code == 0 else None

    # ------------------------------------------------------------ where

    def place(self, root: str, *, team: str, member: str) -> WorktreeSpot:
        if not os.path.isdir(root):
            raise WorktreeError(f"the workspace {root} is no directory", code=WorktreeCode.UNAVAILABLE)
        common = self._run(root, "rev-parse", "--path-format=absolute", "--git-common-dir")
        if common.code != 0:
            raise WorktreeError(
                f"worktree mode needs the workspace {root} to be a git repository: run `git init` there "
                "and commit once (or use workspace_mode = \"shared\")", code=WorktreeCode.UNAVAILABLE)
        if self._commit_of(root, "HEAD") is None:
            raise WorktreeError(
                f"worktree mode needs a commit to start members from: commit once in {root} "
                "(`git add -A && git commit -m init`)", code=WorktreeCode.UNAVAILABLE)
        branch = f"dsh/{team}/{member}"
        if self._run(root, "check-ref-format", "--branch", branch).code != 0:
            raise WorktreeError(f"{branch!r} is not a valid branch name", code=WorktreeCode.UNAVAILABLE)
        return WorktreeSpot(path=str(Path(common.out) / FOLDER / team / member), branch=branch)

    # ------------------------------------------------------------ create and remove

    def _registered(self, root: str, path: str) -> bool:
        listing = self._ok(root, "worktree", "list", "--porcelain")
        real = os.path.realpath(path)
        return any(line == f"worktree {real}" or line == f"worktree {path}" for line in listing.splitlines())

    def create(self, root: str, spot: WorktreeSpot) -> str:
        head = self._commit_of(root, "HEAD")
        if head is None:
            raise WorktreeError(f"no commit to start from in {root}: commit once", code=WorktreeCode.UNAVAILABLE)
        if os.path.isdir(spot.path) and self._registered(root, spot.path):
            return self._commit_of(spot.path, "HEAD") or head
        self._run(root, "worktree", "prune")  # a directory removed by hand leaves a stale registration
        try:
            os.makedirs(os.path.dirname(spot.path), exist_ok=True)
        except OSError as exc:
            raise WorktreeError(f"cannot make {os.path.dirname(spot.path)}: {exc}", code=WorktreeCode.GIT_FAILED) from None
        existing = self._commit_of(root, f"refs/heads/{spot.branch}")
        if existing is not None:
            self._ok(root, "worktree", "add", "--quiet", spot.path, spot.branch)
            return existing
        self._ok(root, "worktree", "add", "--quiet", "-b", spot.branch, spot.path, head)
        log.info("worktree.created", path=spot.path, branch=spot.branch, base=head)
        return head

    def remove(self, root: str, spot: WorktreeSpot, *, force: bool = False) -> bool:
        if not force and not self.state(root, spot).merged:
            return False
        if os.path.isdir(spot.path):
            self._ok(root, "worktree", "remove", "--force", spot.path)
        self._run(root, "worktree", "prune")
        if self._commit_of(root, f"refs/heads/{spot.branch}") is not None:
            self._ok(root, "branch", "-D", "--quiet", spot.branch)
        log.info("worktree.removed", path=spot.path, branch=spot.branch, forced=force)
        return True

    # ------------------------------------------------------------ commit and merge

    def commit_all(self, spot: WorktreeSpot, message: str, *, author: str) -> str | None:
        self._ok(spot.path, "add", "-A")
        merging = self._run(spot.path, "rev-parse", "-q", "--verify", "MERGE_HEAD").code == 0
        if not merging and self._run(spot.path, "diff", "--cached", "--quiet").code == 0:
            return None  # (a merge in progress is concluded even when its result equals the member's side)
        self._ok(spot.path, "commit", "--quiet", "--no-verify", "-m", message, env=_identity(author))
        return self._ok(spot.path, "rev-parse", "HEAD")

    def plan_merge(self, root: str, spot: WorktreeSpot, *, message: str) -> MergePlan:
        target = self._target(root)
        old = self._commit_of(root, "HEAD")
        source = self._commit_of(root, f"refs/heads/{spot.branch}")
        if old is None or source is None:
            raise WorktreeError(f"nothing to merge: no commit on {spot.branch} or in {root}",
                                code=WorktreeCode.GIT_FAILED)
        if target is None:
            return MergePlan(target="HEAD", old=old, new=old, source=source,
                             blocked="the Lead's checkout has a detached HEAD: check out a branch")
        if self._is_ancestor(root, source, old):
            return MergePlan(target=target, old=old, new=old, source=source)
        if self._is_ancestor(root, old, source):
            plan = MergePlan(target=target, old=old, new=source, source=source, fast_forward=True)
        else:
            merged = self._run(root, "merge-tree", "--write-tree", "--name-only", "--no-messages", old, source)
            if merged.code == 1:
                paths = tuple(dict.fromkeys(line for line in merged.out.splitlines()[1:] if line))
                return MergePlan(target=target, old=old, new=old, source=source, conflicts=paths)
            if merged.code != 0:
                raise WorktreeError(f"git merge-tree failed: {merged.err}", code=WorktreeCode.GIT_FAILED)
            tree = merged.out.splitlines()[0]
            new = self._ok(root, "commit-tree", tree, "-p", old, "-p", source, "-m", message, env=_identity(_LEAD))
            plan = MergePlan(target=target, old=old, new=new, source=source)
        blocked = self._run(root, "read-tree", "-m", "-u", "-n", old, plan.new)
        if blocked.code != 0:
            reason = blocked.err.splitlines()[0] if blocked.err else "the checkout cannot take the merge"
            return MergePlan(target=target, old=old, new=plan.new, source=source, fast_forward=plan.fast_forward,
                             blocked=f"the Lead's checkout has uncommitted changes the merge would overwrite "
                                     f"({reason}): commit or stash them and complete again")
        return plan

    def merge_lead(self, root: str, spot: WorktreeSpot, *, author: str) -> tuple[str, ...]:
        target = self._target(root) or "HEAD"
        head = self._commit_of(root, "HEAD")
        if head is None:
            raise WorktreeError(f"no commit to merge in {root}", code=WorktreeCode.GIT_FAILED)
        message = f"Merge {target.removeprefix('refs/heads/')} into {spot.branch}"
        merged = self._run(spot.path, "merge", "--no-ff", "--no-verify", "-m", message, head, env=_identity(author))
        if merged.code == 0:
            return ()
        conflicts = self.pending_merge(spot)
        if not conflicts:  # git refused before merging (a local change, a broken worktree): nothing to resolve
            self._run(spot.path, "merge", "--abort")
            raise WorktreeError(f"git merge failed in {spot.path}: {merged.err or merged.out}",
                                code=WorktreeCode.GIT_FAILED)
        log.info("worktree.lead_merged", path=spot.path, conflicts=list(conflicts))
        return conflicts

    def pending_merge(self, spot: WorktreeSpot) -> tuple[str, ...] | None:
        if self._run(spot.path, "rev-parse", "-q", "--verify", "MERGE_HEAD").code != 0:
            return None
        unmerged = self._run(spot.path, "diff", "--name-only", "--diff-filter=U", "-z")
        paths = [name for name in unmerged.out.split("\0") if name]
        return tuple(name for name in dict.fromkeys(paths) if _has_markers(Path(spot.path, name)))

    def move_ref(self, root: str, plan: MergePlan) -> bool:
        if self._commit_of(root, plan.target) == plan.new:
            return True
        result = self._run(root, "update-ref", "-m", f"dsh: merge {plan.source[:12]}", plan.target, plan.new, plan.old)
        return result.code == 0

    def sync_checkout(self, root: str, plan: MergePlan) -> None:
        if self._target(root) != plan.target:
            return  # the checkout is on another branch now: its files are not the target's
        self._ok(root, "read-tree", "-m", "-u", plan.old, plan.new)

    def merge_applied(self, root: str, plan: MergePlan) -> bool:
        head = self._commit_of(root, plan.target)
        return head is not None and (head == plan.new or self._is_ancestor(root, plan.new, head))

    # ------------------------------------------------------------ reading

    def state(self, root: str, spot: WorktreeSpot) -> WorktreeState:
        exists = os.path.isdir(spot.path)
        branch = self._commit_of(root, f"refs/heads/{spot.branch}")
        ahead = 0
        if branch is not None:
            counted = self._run(root, "rev-list", "--count", f"HEAD..{branch}")
            ahead = int(counted.out) if counted.code == 0 else 0
        dirty = exists and bool(self._run(spot.path, "status", "--porcelain").out)
        return WorktreeState(exists=exists, ahead=ahead, dirty=dirty, branch_exists=branch is not None)

    def diff(self, root: str, spot: WorktreeSpot) -> str:
        parts: list[str] = []
        if self._commit_of(root, f"refs/heads/{spot.branch}") is not None:
            parts.append(self._ok(root, "diff", f"HEAD...{spot.branch}"))
        if os.path.isdir(spot.path):  # read-only: untracked files are diffed against nothing, never added
            parts.append(self._ok(spot.path, "diff", "HEAD"))
            untracked = self._ok(spot.path, "ls-files", "--others", "--exclude-standard", "-z")
            for name in filter(None, untracked.split("\0")):
                parts.append(self._run(spot.path, "diff", "--no-index", "--", os.devnull, name).out)
        return "\n".join(part for part in parts if part)

