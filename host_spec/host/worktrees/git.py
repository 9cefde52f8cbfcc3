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

Across machines (:class:`~host_spec.worktrees.RemoteWorktrees`): a worker's
checkout is a clone of the Lead's repository. It fetches the member's branch
(and what an earlier worker pushed for it) into ``refs/dsh-lead/``, creates the
worktree there, and pushes the member's head to ``refs/dsh-pushed/<branch>`` of
the Lead's repository -- never to ``refs/heads/<branch>``, which the Lead's own
worktree of the member has checked out (git refuses such a push). The Lead's side
fast-forwards the member's branch to that ref (:meth:`GitWorktrees.receive`)
before it commits and merges as for a member on its own machine. Fetch and push
are the worker's own git talking to the Lead's repository, so they run with the
process's environment (its ssh agent, its credential helper), still never
prompting; their errors are redacted.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import structlog

from host_spec.worktrees import MergePlan, WorktreeCode, WorktreeError, WorktreeSpot, WorktreeState

from host_spec.host.redaction import redact_url
from host_spec.host.sandbox.service import host_environment

__all__ = ["GitWorktrees", "FOLDER", "PUSHED", "FETCHED", "KEPT"]

log = structlog.get_logger(__name__)

#: The folder of the members' worktrees inside the repository's common git directory.
FOLDER: Final = "dsh-worktrees"
_LEAD: Final = "dsh"
#: Where a member's head pushed from a worker lands in the Lead's repository (``<PUSHED><branch>``).
PUSHED: Final = "refs/dsh-pushed/"
#: Where a worker's checkout keeps what it fetched from the Lead's repository (``<FETCHED>heads/<branch>``, ...).
FETCHED: Final = "refs/dsh-lead/"
#: Where a worker's checkout keeps a branch of the member's name that was apart from the Lead's.
KEPT: Final = "refs/dsh-kept/"
_ZERO: Final = "0" * 40


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


def _make_parent(spot: WorktreeSpot) -> None:
    try:
        os.makedirs(os.path.dirname(spot.path), exist_ok=True)
    except OSError as exc:
        raise WorktreeError(f"cannot make {os.path.dirname(spot.path)}: {exc}", code=WorktreeCode.GIT_FAILED) from None


def _remote(remote: str) -> str:
    """``remote`` (a URL, a path or a remote's name), refused when git would read it as an option."""
    if not remote or remote.startswith("-"):
        raise WorktreeError(f"{remote!r} names no repository", code=WorktreeCode.UNAVAILABLE)
    return remote


class GitWorktrees:
    """Worktrees and merges of any repository, through the ``git`` command (stateless)."""

    def __init__(self, git: str = "git", environ: Mapping[str, str] | None = None) -> None:
        self.git = git
        env = host_environment(os.environ if environ is None else environ)
        env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
        remote = dict(os.environ if environ is None else environ)  # fetch and push: the process's own credentials
        remote.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
        for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):  # a parent's git context must not leak in
            env.pop(name, None)
            remote.pop(name, None)
        self._env = env
        self._remote_env = remote

    # ------------------------------------------------------------ running git

    def _run(self, cwd: str, *args: str, env: Mapping[str, str] | None = None, remote: bool = False) -> _Git:
        base = self._remote_env if remote else self._env
        try:
            done = subprocess.run(
                [self.git, *args], cwd=cwd, capture_output=True, text=True, env={**base, **(env or {})},
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
        _make_parent(spot)
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
        if self._commit_of(root, f"{PUSHED}{spot.branch}") is not None:  # what a worker pushed for it goes too
            self._ok(root, "update-ref", "-d", f"{PUSHED}{spot.branch}")
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
        return self._merge_into(spot, head, target, author)

    def _merge_into(self, spot: WorktreeSpot, head: str, target: str, author: str) -> tuple[str, ...]:
        """Merge commit ``head`` (the tip of the Lead's ``target``) into ``spot``'s worktree; the conflicted paths."""
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

    # ------------------------------------------------------------ across machines

    def _remote_ok(self, cwd: str, *args: str) -> str:
        result = self._run(cwd, *args, remote=True)
        if result.code != 0:
            text = f"git {args[0]} from the Lead's repository failed: {result.err or result.out}"
            raise WorktreeError(redact_url(text), code=WorktreeCode.GIT_FAILED)
        return result.out

    def mirror(self, root: str, lead_path: str) -> WorktreeSpot | None:
        parts = Path(lead_path).parts
        if len(parts) < 4 or parts[-3] != FOLDER:
            return None
        return self.place(root, team=parts[-2], member=parts[-1])

    def _fetch(self, root: str, remote: str, *refs: str) -> dict[str, str]:
        """Fetch those of ``refs`` the Lead's repository has into :data:`FETCHED`; ref -> commit fetched."""
        listed = self._remote_ok(root, "ls-remote", _remote(remote), *refs)
        there = {line.split("\t", 1)[1] for line in listed.splitlines() if "\t" in line}
        wanted = [ref for ref in refs if ref in there]
        if wanted:
            self._remote_ok(root, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote,
                            *(f"+{ref}:{FETCHED}{ref.removeprefix('refs/')}" for ref in wanted))
        fetched = {ref: self._commit_of(root, f"{FETCHED}{ref.removeprefix('refs/')}") for ref in wanted}
        return {ref: commit for ref, commit in fetched.items() if commit is not None}

    def create_from(self, root: str, spot: WorktreeSpot, *, remote: str) -> str:
        if os.path.isdir(spot.path) and self._registered(root, spot.path):
            return self._commit_of(spot.path, "HEAD") or ""  # the member's work here is kept as it is
        branch, pushed = f"refs/heads/{spot.branch}", f"{PUSHED}{spot.branch}"
        fetched = self._fetch(root, remote, branch, pushed)
        if branch not in fetched:
            raise WorktreeError(
                f"the Lead's repository {redact_url(remote)} has no branch {spot.branch}: the worker's --lead-repo "
                "must name the repository the Lead runs in (and the member must work in worktree mode)",
                code=WorktreeCode.UNAVAILABLE)
        base = fetched[branch]
        if pushed in fetched and self._is_ancestor(root, base, fetched[pushed]):
            base = fetched[pushed]  # an earlier worker's push the Lead has not taken yet
        local = self._commit_of(root, branch)
        if local is not None and local != base and not self._is_ancestor(root, base, local):
            # Behind the Lead's (fast-forward), or apart from it (a branch of that name left by an
            # earlier run): the Lead's branch is the member's; what was here is kept under KEPT.
            if not self._is_ancestor(root, local, base):
                self._ok(root, "update-ref", f"{KEPT}{spot.branch}", local)
                log.warning("worktree.local_branch_replaced", branch=spot.branch, kept=local, lead=base)
            self._ok(root, "update-ref", branch, base, local)
        self._run(root, "worktree", "prune")
        _make_parent(spot)
        if local is None:
            self._ok(root, "worktree", "add", "--quiet", "-b", spot.branch, spot.path, base)
        else:
            self._ok(root, "worktree", "add", "--quiet", spot.path, spot.branch)
        log.info("worktree.created_from_lead", path=spot.path, branch=spot.branch, base=base)
        return self._commit_of(spot.path, "HEAD") or base

    def push(self, spot: WorktreeSpot, *, remote: str) -> str:
        head = self._commit_of(spot.path, "HEAD")
        if head is None:
            raise WorktreeError(f"no worktree with a commit at {spot.path}", code=WorktreeCode.GIT_FAILED)
        self._remote_ok(spot.path, "push", "--quiet", "--no-verify", _remote(remote), f"{head}:{PUSHED}{spot.branch}")
        log.info("worktree.pushed", branch=spot.branch, head=head)
        return head

    def merge_from(self, spot: WorktreeSpot, *, remote: str, target: str, author: str) -> tuple[str, ...]:
        fetched = self._fetch(spot.path, remote, target)
        if target not in fetched:
            raise WorktreeError(f"the Lead's repository {redact_url(remote)} has no {target}",
                                code=WorktreeCode.GIT_FAILED)
        return self._merge_into(spot, fetched[target], target, author)

    def receive(self, root: str, spot: WorktreeSpot) -> str | None:
        pushed = self._commit_of(root, f"{PUSHED}{spot.branch}")
        branch = self._commit_of(root, f"refs/heads/{spot.branch}")
        if pushed is None or branch == pushed or (branch is not None and self._is_ancestor(root, pushed, branch)):
            return None  # nothing pushed, or the branch has it already
        if branch is not None and not self._is_ancestor(root, branch, pushed):
            raise WorktreeError(
                f"{spot.branch} moved both here and on a worker ({branch[:12]} and {pushed[:12]}): "
                f"merge {PUSHED}{spot.branch} into it by hand", code=WorktreeCode.GIT_FAILED)
        if branch is not None and os.path.isdir(spot.path) and self._registered(root, spot.path):
            self._ok(spot.path, "merge", "--ff-only", "--quiet", pushed)  # the branch and its files move together
        else:
            self._ok(root, "update-ref", f"refs/heads/{spot.branch}", pushed, branch or _ZERO)
        log.info("worktree.received", branch=spot.branch, head=pushed)
        return pushed

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

