"""Crash driver: a worktree-mode Lead on a shared store, its member on a worker, SIGKILLed at one durable point.

Usage: ``python wt_remote_crash_driver.py STORE_URL REPO SCRIPT PROFILE POINT``

It does what ``dsh run --store STORE_URL --profile PROFILE --model scripted:SCRIPT
--workspace REPO go`` does, plus one plugin that kills this very process with
SIGKILL at the chosen point. The plugin provides the Lead's worktrees -- the
placement-aware ones a Lead on a shared store uses, so the member's steps still run
on its worker -- wrapped to kill right after a git step; log points fire right
after the commit that makes the fact durable. Points:

``merge-received``   the worker committed and pushed, the member's branch here took the head; nothing recorded
``merge-intent``     the Lead durably holds ``team/merge`` ``intent``; its branch has not moved
``ref-moved``        the Lead's branch moved; its checkout was not synced yet
``checkout-synced``  the Lead's checkout was synced; the task is not completed yet
``task-completed``   the Lead durably holds the completed task; ``done`` not recorded yet
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from host_spec import hookimpl
from host_spec.host.app import Host
from host_spec.host.cli.run_commands import claim_root
from host_spec.host.cli.run_settings import RunSettings, encode_settings
from host_spec.host.placement.worktrees import PlacedWorktrees
from host_spec.worktrees import MergePlan, Worktrees, WorktreeSpot


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class KillingWorktrees(PlacedWorktrees):
    def __init__(self, host: Any, loop: asyncio.AbstractEventLoop, point: str) -> None:
        super().__init__(host, loop)
        self.point = point

    def commit_all(self, spot: WorktreeSpot, message: str, *, author: str) -> str | None:
        head = super().commit_all(spot, message, author=author)
        if self.point == "merge-received":
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


class Killer:
    def __init__(self, point: str) -> None:
        self.point = point
        self.seen: dict[str, int] = {}

    @hookimpl
    def dsh_plugin_loaded(self, host: Any, ctx: Any) -> None:
        ctx.provide(Worktrees, KillingWorktrees(host, asyncio.get_running_loop(), self.point))

    @hookimpl
    def dsh_session_flushed(self, host: Any, session: Any, durable_seq: int) -> None:
        start = self.seen.get(session.id, 0)
        self.seen[session.id] = durable_seq
        if session.header.parent_session is not None:
            return
        for event in session.events[start:durable_seq]:
            value = event.value() if event.type.startswith("team/") else None
            if self.point == "merge-intent" and event.type == "team/merge" and value["phase"] == "intent":
                _die()
            if self.point == "task-completed" and event.type == "team/task" and value["task"]["status"] == "completed":
                _die()


async def main(url: str, repo: str, script: str, profile: str, point: str) -> int:
    model = f"scripted:{script}"
    host = await Host.open(url, profile, model, extra_plugins=[("crash-killer", Killer(point))])
    try:
        session = await claim_root(host, repo)
        host.store.put_run(session.id, encode_settings(RunSettings(profile, model)))  # as dsh run: a worker resumes it
        await host.run("go", session=session)
    finally:
        await host.close()
    return 3


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:6])))
