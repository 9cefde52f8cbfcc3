"""``dsh team serve``: the panel of a stored run, read-only; followed live from a shared store.

::

    dsh team serve [--data-dir D] [SESSION_ID] [--host 127.0.0.1] [--port 0]
    dsh team serve --store postgresql://... [SESSION_ID] [--host 127.0.0.1] [--port 0]

The command (:mod:`dsh_team.web.serve_cli`) picks and reads the Lead log exactly as
``dsh team show`` does (the same session choice, the same salvage of a damaged
log); this module serves it. The page can move through the run's history with the
time slider but cannot change anything. The URL printed on stderr carries a fresh
random token. Stop with Ctrl-C.

From a shared store the Team may be running in another process: the panel then
follows the store (:mod:`dsh_team.web.followed`) and pushes every commit of that
run to open pages, and a change is refused with ``409 TEAM_RUN_LIVE`` naming the
process that holds the Team -- only that process appends to its Lead log, so it is
the one to steer from (its own ``dsh run --web`` panel). Once nobody holds it the
refusal is the stored run's ``405 WEB_READ_ONLY``.
"""

from __future__ import annotations

import asyncio
import secrets
import sys

import uvicorn
from starlette.applications import Starlette

from host_spec.cli import FollowingReader, SessionReader, StoredLog
from host_spec.worktrees import Worktrees

from dsh_team.web.app import WebError, build_app, read_only
from dsh_team.web.followed import FollowedRun
from dsh_team.web.plugin import GRACE_S, bind
from dsh_team.web.sources import StoredRun
from dsh_team.web.stream import Feed

__all__ = ["serve_stored", "serve_followed"]


async def serve_stored(
    stored: StoredLog, reader: SessionReader, *, host: str, port: int, worktrees: Worktrees | None = None
) -> int:
    """Serve ``stored`` (a Lead log of ``reader``'s store) read-only until interrupted; returns 0."""
    feed = Feed(StoredRun(stored, reader, worktrees))
    token = secrets.token_urlsafe(24)
    return await _serve(build_app(feed, token), f"{stored.header.id} (read-only)", token, host, port)


async def serve_followed(stored: StoredLog, reader: FollowingReader, *, host: str, port: int) -> int:
    """Serve ``stored`` read-only and follow the shared store while it runs elsewhere, until interrupted; returns 0."""
    run = FollowedRun(stored, reader)
    feed = Feed(run)

    async def refusal() -> WebError:
        holder = await asyncio.to_thread(run.holder)
        if holder is None:
            return read_only()
        return WebError(409, "TEAM_RUN_LIVE",
                        f"the run of Team {run.team_id} is live in process {holder}; change it from that run's "
                        "own panel (`dsh run --web`), or stop the run first")  # fmt: skip

    token = secrets.token_urlsafe(24)
    app = build_app(feed, token, refusal=refusal)
    run.start(feed.poke)
    try:
        return await _serve(app, f"{stored.header.id} (read-only, following the store)", token, host, port)
    finally:  # not awaited: uvicorn re-raises the Ctrl-C it caught, and an await here could be cut short
        feed.close_all()
        run.close()


async def _serve(app: Starlette, title: str, token: str, host: str, port: int) -> int:
    sock = bind(host, port)
    bound, bound_port = sock.getsockname()[:2]
    print(f"dsh: Team panel of {title}: http://{bound}:{bound_port}/?token={token}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=GRACE_S)
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()
    return 0
