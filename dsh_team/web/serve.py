"""``dsh team serve``: the panel of a finished or crashed run, read-only from its logs.

::

    dsh team serve [--data-dir D] [SESSION_ID] [--host 127.0.0.1] [--port 0]

The command (:mod:`dsh_team.views.cli`) picks and reads the Lead log exactly as
``dsh team show`` does (the same session choice, the same salvage of a damaged
log); this module serves it. The page can move through the run's history with the
time slider but cannot change anything. The URL printed on stderr carries a fresh
random token. Stop with Ctrl-C.
"""

from __future__ import annotations

import secrets
import sys

import uvicorn

from host_spec.cli import SessionReader, StoredLog

from dsh_team.web.app import build_app
from dsh_team.web.plugin import GRACE_S, bind
from dsh_team.web.sources import StoredRun
from dsh_team.web.stream import Feed

__all__ = ["serve_stored"]


async def serve_stored(stored: StoredLog, reader: SessionReader, *, host: str, port: int) -> int:
    """Serve ``stored`` (a Lead log of ``reader``'s store) read-only until interrupted; returns 0."""
    feed = Feed(StoredRun(stored, reader))
    token = secrets.token_urlsafe(24)
    sock = bind(host, port)
    bound, bound_port = sock.getsockname()[:2]
    print(f"dsh: Team panel of {stored.header.id} (read-only): http://{bound}:{bound_port}/?token={token}",
          file=sys.stderr, flush=True)
    config = uvicorn.Config(build_app(feed, token), log_level="warning", lifespan="off", timeout_graceful_shutdown=GRACE_S)
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()
    return 0
