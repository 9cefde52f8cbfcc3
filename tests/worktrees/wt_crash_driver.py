"""Crash driver: a worktree-mode Team run, SIGKILLed at one durable point of worktree creation or of a merge.

Usage: ``python wt_crash_driver.py DATA_DIR REPO SCRIPT PROFILE POINT PROMPT``

It does what ``dsh run --profile PROFILE --model scripted:SCRIPT --workspace REPO``
does, plus one plugin that kills this very process with SIGKILL (no cleanup, no
final flush) at the chosen point. Log points fire right after the group commit
that makes the fact durable; git points fire right after the git step returned,
through a :class:`~host_spec.worktrees.Worktrees` that wraps the host's (provided
before the ``workspace`` plugin loads, so the host uses it). Points:

``worktree-recorded``  the Lead durably holds ``team/worktree`` (no worktree yet)
``worktree-created``   ``git worktree add`` ran; the member's session does not exist yet
``member-started``     the member's first prompt is durable in its own log, no ``active`` yet
``merge-committed``    the member's changes are committed on its branch; nothing recorded
``merge-intent``       the Lead durably holds ``team/merge`` ``intent``; the branch has not moved
``ref-moved``          the Lead's branch moved; its checkout was not synced yet
``checkout-synced``    the Lead's checkout was synced; the task is not completed yet
``task-completed``     the Lead durably holds the completed task; ``done`` not recorded yet

``PROMPT`` ``RESUME:<session id>`` resumes that stored root (``dsh resume``). Any
other point never kills. Exit status 3: the run finished without being killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from host_spec import hookimpl
from host_spec.events import EventType
from host_spec.host.app import Host
from host_spec.host.worktrees.git import GitWorktrees
from host_spec.worktrees import MergePlan, Worktrees, WorktreeSpot


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class KillingWorktrees(GitWorktrees):
    """The host's git worktrees, killing the process right after the chosen git step."""

    def __init__(self, point: str) -> None:
        super().__init__()
        self.point = point

    def create(self, root: str, spot: WorktreeSpot) -> str:
        base = super().create(root, spot)
        if self.point == "worktree-created":
            _die()
        return base

    def commit_all(self, spot: WorktreeSpot, message: str, *, author: str) -> str | None:
        head = super().commit_all(spot, message, author=author)
        if self.point == "merge-committed":
            _die()
        return head

    def move_ref(self, root: str, plan: MergePlan) -> bool:
        moved = super().move_ref(root, plan)
        if self.point == "ref-moved":
            _die()
        return moved

    def sync_checkout(self, root: str, plan: MergePlan) -> None:
        super().sync_checkout(root, plan)
        if self.point == "checkout-synced":
            _die()


def _log_point(point: str, event: Any) -> bool:
    value = event.value() if event.type.startswith("team/") else None
    if point == "worktree-recorded":
        return event.type == "team/worktree"
    if point == "merge-intent":
        return event.type == "team/merge" and value["phase"] == "intent"
    if point == "task-completed":
        return event.type == "team/task" and value["task"]["status"] == "completed"
    return False


class Killer:
    """Provides the killing worktrees and kills after the commit that makes a log point durable."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.seen: dict[str, int] = {}

    @hookimpl
    def dsh_plugin_loaded(self, host: Any, ctx: Any) -> None:
        ctx.provide(Worktrees, KillingWorktrees(self.point))

    @hookimpl
    def dsh_session_flushed(self, host: Any, session: Any, durable_seq: int) -> None:
        start = self.seen.get(session.id, 0)
        self.seen[session.id] = durable_seq
        fresh = session.events[start:durable_seq]
        child = session.header.parent_session is not None
        if child and self.point == "member-started":
            if any(event.type == EventType.INBOX_SPLICED for event in fresh):
                _die()
        elif not child and any(_log_point(self.point, event) for event in fresh):
            _die()


async def main(data_dir: str, repo: str, script: str, profile: str, point: str, prompt: str) -> int:
    host = await Host.open(data_dir, profile, f"scripted:{script}", extra_plugins=[("crash-killer", Killer(point))])
    try:
        if prompt.startswith("RESUME:"):
            await host.resume(prompt.removeprefix("RESUME:"))
        else:
            await host.run(prompt, cwd=repo)
    finally:
        await host.close()
    return 3


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:7])))
