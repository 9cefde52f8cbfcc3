"""``--watch`` for ``dsh run`` and ``dsh resume``: plugin reloads while the team runs.

Why the process stays up after the team is quiescent: a plugin author's loop is edit,
save, look; a run that exits as soon as its agents are idle would leave nothing to
reload into. So a watched run keeps its host (agents, inboxes, the web panel if any)
until Ctrl-C or SIGTERM, then closes as an unwatched run would, with the same exit
status.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from host_spec.extras import require
from host_spec.host.plugins.watch import PluginWatcher

__all__ = ["watching", "wait_for_stop", "visible_tools", "tool_changes"]


def visible_tools(host: Any) -> dict[str, tuple[object, ...]]:
    """Per live agent, the tool specs it sees (identity tells a reinstall)."""
    return {agent.id: tuple(host.tools.visible(agent)) for agent in host.agents.list()}


def tool_changes(before: dict[str, tuple[object, ...]], after: dict[str, tuple[object, ...]]) -> int:
    return sum(1 for key, tools in after.items()
               if len(tools) != len(before.get(key, ())) or any(a is not b for a, b in zip(tools, before.get(key, ()))))


@asynccontextmanager
async def watching(host: Any, extra: Sequence[Path], write: Any = print) -> AsyncIterator[PluginWatcher]:
    """Watch the host's plugins (and ``extra``) for the duration of the block.

    Raises:
        ExtraNotInstalledError: ``EXTRA_NOT_INSTALLED`` when ``watchfiles`` (the ``dev`` extra) is missing.
    """
    require("watchfiles", extra="dev", feature="--watch")
    watcher = PluginWatcher(host.plugins, write, extra=extra, tool_counts=lambda: visible_tools(host),
                            compare=tool_changes)
    stop = asyncio.Event()
    task = asyncio.ensure_future(watcher.run(stop))
    await asyncio.sleep(0)
    write(f"[dsh] watching {len(watcher.paths())} path(s) for plugin changes")
    try:
        yield watcher
    finally:
        stop.set()
        await task


async def wait_for_stop(write: Any = print) -> None:
    """Park the quiescent run until SIGINT or SIGTERM."""
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopped.set)
    write("[dsh] the team is quiescent; still watching (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        await stopped.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
