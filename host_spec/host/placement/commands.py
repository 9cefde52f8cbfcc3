"""A Team's check commands for a member on a worker run where its files are: in its worktree there.

A coordination plugin runs a task's checks through the host's
:class:`~host_spec.workspace.CommandRunner` in the member's workspace root (its
worktree, in ``worktree`` mode). On a shared store the Lead's host wraps the
workspace's runner in :class:`PlacedCommands`: a command whose root is the
worktree of a member whose calls run on a worker goes to that worker as a
:data:`~.wire.WORKTREE_OP` ``check`` step (:mod:`.checkouts` runs it in the
member's worktree of its clone, under the member's sandbox policy, like its own
``bash``). Everything else -- the Lead's checkout, a shared-mode member, no live
worker, a step no worker took in time, a worker on this machine -- runs here.

An interrupt (the caller's signal) withdraws the step and the worker kills the
command, as for a ``bash`` call; a worker that died meanwhile makes the check fail
(a ``WorkspaceError``: the gate records the check as failed, the task stays
``in_progress``, and completing again runs it again).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from host_spec.lifetime import AbortSignal
from host_spec.workspace import CommandOutcome, CommandRunner, WorkspaceError

from host_spec.host.agents.loop import race
from host_spec.host.placement.wire import WORKTREE_OP, WorktreeOp
from host_spec.host.worktrees.git import FOLDER

__all__ = ["PlacedCommands"]


class PlacedCommands:
    """``local`` with the commands run in a placed member's worktree run on its worker (module docstring).

    Args:
        placement: The Lead's :class:`~host_spec.host.placement.lead.Placement`.
        local: The workspace's own runner.
    """

    def __init__(self, placement: Any, local: CommandRunner) -> None:
        self.placement = placement
        self.local = local

    def _member(self, root: str) -> Any:
        """The member whose worktree ``root`` is (``None``: the Lead's checkout, a shared-mode root)."""
        parts = Path(root).parts
        if len(parts) < 4 or parts[-3] != FOLDER:
            return None
        where = os.path.realpath(root)
        for agent in list(self.placement.host.agents.list()):
            cwd = agent.session.header.cwd
            if cwd is not None and os.path.realpath(cwd) == where:
                return agent
        return None

    async def run_command(
        self, root: str, command: str, *, timeout_ms: int, signal: AbortSignal | None = None,
        member: str | None = None,
        role: str | None = None,
    ) -> CommandOutcome:
        agent = self._member(root)
        if agent is not None:
            op = WorktreeOp(op="check", path=root, command=command, timeout_ms=timeout_ms, author=member or agent.name,
                            role=role or "")
            step = self.placement.run_step(agent, WORKTREE_OP, msgspec.json.encode(op).decode())
            finished, answer = await race(step, signal if signal is not None else AbortSignal())
            if not finished:
                return CommandOutcome(exit_code=None, output="", interrupted=True)
            if answer is not None:
                result = answer.result
                if answer.lost is not None or not isinstance(result, dict):
                    raise WorkspaceError(f"the worker running {agent.name} stopped before the check ended; "
                                         "complete again to run it again")
                failure = result.get("error")
                if isinstance(failure, dict):
                    raise WorkspaceError(f"on {agent.name}'s worker: {failure.get('message')}")
                if not result.get("local"):
                    return msgspec.convert(result.get("outcome"), CommandOutcome)
        return await self.local.run_command(root, command, timeout_ms=timeout_ms, signal=signal, member=member,
                                            role=role)
