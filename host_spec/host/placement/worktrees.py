"""The Lead's git worktrees when members run on workers: a completion's git steps go where the member's files are.

On a shared store the Lead's host provides this :class:`~host_spec.worktrees.Worktrees`
instead of the plain one. The Team's merge on completion
(``dsh_team.worktrees.merge``) asks, in order: which files of the member's
worktree still hold conflict markers (``pending_merge``), commit the member's
changes (``commit_all``), plan the merge into the Lead's branch (``plan_merge``),
and on a conflict merge the Lead's branch into the member's worktree
(``merge_lead``). When the member's calls run on a worker (:meth:`Placement.placed
<host_spec.host.placement.lead.Placement.placed>`), its files are in that worker's
worktree (:mod:`.checkouts`), so those three steps run there, as a
:data:`~.wire.WORKTREE_OP` call:

* ``pending_merge``: the worker's answer;
* ``commit_all``: the worker commits and pushes the head to the Lead's repository
  (``refs/dsh-pushed/<branch>``), then the member's branch here -- and the Lead's
  worktree of it, where nobody writes meanwhile -- fast-forwards to it
  (:meth:`~host_spec.host.worktrees.git.GitWorktrees.receive`);
* ``merge_lead``: the worker fetches the Lead's branch and merges it into its
  worktree, so the markers are where the member edits.

Everything else -- the plan, the compare-and-set of the Lead's branch, the
checkout sync, and the merge's durable records -- runs here exactly as for a
member on this machine, so a SIGKILL anywhere still ends with the merge done once
or not at all. A step a worker did not answer (it died: ``TOOL_OUTCOME_UNKNOWN``)
fails with ``WORKTREE_GIT_FAILED`` -- the task stays ``in_progress`` and completing
again repeats the idempotent steps. A step no worker took in time, a member whose
calls run here, or a worker on this machine (no ``--workspace``) runs here, after
taking what a worker pushed earlier.

The steps block (the Team runs them in a thread); each waits for the worker on the
host's event loop. Called on that loop itself, a step runs here (it cannot wait
for the loop it blocks).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import msgspec
import structlog

from host_spec import hookimpl
from host_spec.worktrees import WorktreeCode, WorktreeError, Worktrees, WorktreeSpot

from host_spec.host.placement.wire import WORKTREE_OP, WorktreeOp
from host_spec.host.worktrees.git import GitWorktrees

__all__ = ["PlacedWorktrees", "placed_worktrees_plugin"]

log = structlog.get_logger(__name__)


class PlacedWorktrees(GitWorktrees):
    """:class:`GitWorktrees` whose member steps run on the member's worker when it has one (module docstring).

    Args:
        host: The Lead's host (its agents and its placement).
        loop: The host's event loop, where placement waits for workers.
    """

    def __init__(self, host: Any, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.host = host
        self.loop = loop

    def _member(self, spot: WorktreeSpot) -> Any:
        where = os.path.realpath(spot.path)
        for agent in list(self.host.agents.list()):
            cwd = agent.session.header.cwd
            if cwd is not None and os.path.realpath(cwd) == where:
                return agent
        return None

    def _ask(self, spot: WorktreeSpot, op: WorktreeOp) -> dict[str, Any] | None:
        """The worker's answer to ``op``; ``None``: run the step here."""
        placement = getattr(self.host, "placement", None)
        agent = self._member(spot)
        if placement is None or agent is None or self.loop.is_closed():
            return None
        try:
            asyncio.get_running_loop()
            return None  # on the loop itself: waiting for it here would block it
        except RuntimeError:
            pass
        arguments = msgspec.json.encode(op).decode()
        answer = asyncio.run_coroutine_threadsafe(placement.run_step(agent, WORKTREE_OP, arguments), self.loop).result()
        if answer is None:
            return None
        result = answer.result
        if answer.lost is not None or not isinstance(result, dict):
            raise WorktreeError(f"the worker running {agent.name} stopped before it answered the {op.op} step "
                                f"in its worktree; complete again", code=WorktreeCode.GIT_FAILED)
        failure = result.get("error")
        if isinstance(failure, dict):
            raise WorktreeError(f"on {agent.name}'s worker: {failure.get('message')}",
                                code=str(failure.get("code") or WorktreeCode.GIT_FAILED))
        if result.get("local"):
            return None
        log.info("placement.worktree_step", member=agent.name, op=op.op)
        return result

    def pending_merge(self, spot: WorktreeSpot) -> tuple[str, ...] | None:
        answer = self._ask(spot, WorktreeOp(op="pending", path=spot.path))
        if answer is None:
            return super().pending_merge(spot)
        pending = answer.get("pending")
        return None if pending is None else tuple(pending)

    def commit_all(self, spot: WorktreeSpot, message: str, *, author: str) -> str | None:
        answer = self._ask(spot, WorktreeOp(op="commit", path=spot.path, message=message, author=author))
        self.receive(spot.path, spot)  # the head the worker pushed now, or one pushed before the member came here
        if answer is None:
            return super().commit_all(spot, message, author=author)
        head = answer.get("head")
        return str(head) if head is not None else None

    def merge_lead(self, root: str, spot: WorktreeSpot, *, author: str) -> tuple[str, ...]:
        target = self._target(root) or "HEAD"
        answer = self._ask(spot, WorktreeOp(op="merge", path=spot.path, target=target, author=author))
        if answer is None:
            return super().merge_lead(root, spot, author=author)
        return tuple(answer.get("conflicts") or ())


class _Provider:
    """Provides :class:`PlacedWorktrees` as the host's worktrees (unless a plugin loaded earlier provides some)."""

    @hookimpl
    def dsh_plugin_loaded(self, host: Any, ctx: Any) -> None:
        if host.find_service(Worktrees) is None:
            ctx.provide(Worktrees, PlacedWorktrees(host, asyncio.get_running_loop()))


def placed_worktrees_plugin() -> object:
    """The plugin a Lead's host on a shared store loads before the profile's (``workspace`` then keeps its service)."""
    return _Provider()
