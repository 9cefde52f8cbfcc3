"""A worker's own worktrees for ``worktree``-mode members, in its clone of the Lead's repository.

A member in ``worktree`` mode records its worktree in the Lead's repository as its
header's ``cwd`` (``<lead repo>/.git/dsh-worktrees/<team>/<member>``). A worker on
another machine cannot act there; with ``--workspace`` (a clone of the Lead's
repository) and ``--lead-repo`` (how that clone reaches it: a URL, a path, or a
remote's name, ``origin`` by default) it runs the member in the same place of its
own clone instead, made on the member's branch from the Lead's repository the
first time the member's calls come here (:meth:`WorkerCheckouts.cwd_for`).

The Lead asks for the steps of a completion as :data:`~.wire.WORKTREE_OP`
calls (:meth:`WorkerCheckouts.answer`): the task's checks, run in the member's
worktree here (:mod:`.commands`); which files still hold conflict markers;
commit and push the member's head to the Lead's repository (``refs/dsh-pushed/``),
where the Lead's side takes it before it merges; and, on a conflict, merge the
Lead's branch into this worktree, so the member resolves the markers here. Each
step is idempotent: one a dying worker may have done is done again harmlessly.

A member in ``shared`` mode, or a worker without ``--workspace`` (on the Lead's
machine, acting in the recorded paths), is answered ``local``: the Lead does the
step itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import structlog

from host_spec.lifetime import AbortSignal
from host_spec.workspace import CommandRunner, WorkspaceError
from host_spec.worktrees import WorktreeError

from host_spec.host.placement.wire import WorktreeOp
from host_spec.host.redaction import redact_url
from host_spec.host.worktrees.git import GitWorktrees

__all__ = ["WorkerCheckouts", "DEFAULT_LEAD_REPO"]

log = structlog.get_logger(__name__)

#: How a worker's clone reaches the Lead's repository unless ``--lead-repo`` says otherwise.
DEFAULT_LEAD_REPO = "origin"
_op = msgspec.json.Decoder(WorktreeOp)


class WorkerCheckouts:
    """Maps members' recorded workspaces to this worker's checkout, and runs their worktree steps.

    Args:
        workspace: This worker's checkout (``--workspace``), ``None`` to act in the recorded paths.
        lead_repo: How ``workspace`` reaches the Lead's repository (``--lead-repo``).
        git: The host's git (:class:`~host_spec.host.worktrees.git.GitWorktrees`).
    """

    def __init__(self, workspace: str | None, lead_repo: str, git: GitWorktrees | None = None) -> None:
        self.workspace = workspace
        self.lead_repo = lead_repo
        self.git = git or GitWorktrees()

    def cwd_for(self, recorded: str | None) -> str | None:
        """Where a member whose header records ``recorded`` works here (its worktree made if need be; blocks).

        Raises:
            WorktreeError: the worktree could not be made (the message names ``--lead-repo``).
        """
        if self.workspace is None:
            return recorded
        spot = self.git.mirror(self.workspace, recorded) if recorded is not None else None
        if spot is None:
            return self.workspace  # a shared-mode member: the checkout itself
        try:
            self.git.create_from(self.workspace, spot, remote=self.lead_repo)
        except WorktreeError as exc:
            raise WorktreeError(f"this worker cannot make {spot.branch}'s worktree from --lead-repo "
                                f"{redact_url(self.lead_repo)}: {exc.message}", code=exc.code) from None
        return spot.path

    async def answer(self, host: Any, arguments: str, signal: AbortSignal) -> dict[str, Any]:
        """Answer one step: a ``check`` runs the command in the member's worktree here, the rest is :meth:`run`.

        The check runs through ``host``'s :class:`~host_spec.workspace.CommandRunner`
        (the ``bash`` tool's rules and the member's sandbox policy); ``signal`` (the
        Lead withdrew the step) kills it.
        """
        try:
            op = _op.decode(arguments)
        except msgspec.DecodeError:
            op = None
        if op is None or op.op != "check":
            return await asyncio.to_thread(self.run, arguments)
        runner = host.find_service(CommandRunner)
        if runner is None:
            return {"local": True}
        try:
            cwd = await asyncio.to_thread(self.cwd_for, op.path) or op.path
            outcome = await runner.run_command(cwd, op.command, timeout_ms=op.timeout_ms, signal=signal,
                                               member=op.author or None, role=op.role or None)
        except (WorktreeError, WorkspaceError) as exc:
            return {"error": {"code": exc.code, "message": exc.message}}
        return {"outcome": msgspec.to_builtins(outcome)}

    def run(self, arguments: str) -> dict[str, Any]:
        """Run one :class:`~.wire.WorktreeOp` (JSON) in the member's worktree here; its answer (blocks)."""
        try:
            op = _op.decode(arguments)
            if self.workspace is None:
                return {"local": True}
            spot = self.git.mirror(self.workspace, op.path)
            if spot is None:
                return {"local": True}
            self.git.create_from(self.workspace, spot, remote=self.lead_repo)  # (a no-op once it is here)
            if op.op == "pending":
                pending = self.git.pending_merge(spot)
                return {"pending": None if pending is None else list(pending)}
            if op.op == "commit":
                self.git.commit_all(spot, op.message, author=op.author)
                return {"head": self.git.push(spot, remote=self.lead_repo)}
            if op.op == "merge":
                conflicts = self.git.merge_from(spot, remote=self.lead_repo, target=op.target, author=op.author)
                return {"conflicts": list(conflicts)}
            return {"error": {"code": "WORKTREE_GIT_FAILED", "message": f"no worktree step {op.op!r}"}}
        except WorktreeError as exc:
            log.warning("worker.worktree_step_failed", error=exc.message)
            return {"error": {"code": exc.code, "message": exc.message}}
        except msgspec.DecodeError as exc:
            return {"error": {"code": "WORKTREE_GIT_FAILED", "message": f"unreadable worktree step: {exc}"}}
