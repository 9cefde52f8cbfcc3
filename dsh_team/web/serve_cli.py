"""``dsh team serve``: the Team panel of a stored run, or of one another process runs on a shared store.

::

    dsh team serve [--data-dir D] [SESSION_ID] [--host H] [--port P]   # the browser panel (dsh-team[web])
    dsh team serve --store URL [SESSION_ID]     # the same, followed live while another process runs the Team

It picks and reads the Lead log exactly as ``dsh team show`` does
(:func:`dsh_team.views.cli.lead_of`). Importing this module needs no extra: the
``dsh`` parser is built on every command, so the web server's modules are imported
only when the command runs, after :func:`dsh_team.web.require_web` said what to
install if they are missing.
"""

from __future__ import annotations

import argparse
from typing import Any

from host_spec.cli import HANDLER_KEY, CliEnv, FollowingReader

from dsh_team.views.cli import lead_of
from dsh_team.web import require_web

__all__ = ["register_serve", "serve_command"]


def register_serve(commands: Any, env: CliEnv) -> None:
    """Add ``team serve`` to the ``dsh team`` parser (:func:`dsh_team.cli.register`)."""
    serve = commands.add_parser(
        "serve", help="open a stored Team in the browser (read-only)",
        description="Serve the Team panel of a stored run, folded from its Lead log (read-only; needs dsh-team[web]). "
                    "With --store the panel follows the shared store live while another process runs the Team.",
    )
    env.add_data_dir(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    serve.add_argument("--port", type=int, default=0, help="port to bind (default: 0, any free port)")
    serve.add_argument("session_id", nargs="?", default=None,
                       help="Lead (or teammate) session id (default: the most recent root session)")
    serve.set_defaults(**{HANDLER_KEY: lambda args: serve_command(args, env)})


async def serve_command(args: argparse.Namespace, env: CliEnv) -> int:
    """Serve the Team panel of the Lead log ``team show`` would show, until interrupted.

    From a shared store (``--store``) the panel follows the store live, for a Team
    another process may be running; from a data directory it shows the logs as read.

    Raises:
        ExtraNotInstalledError: ``EXTRA_NOT_INSTALLED`` without the ``web`` extra.
        DshError: nothing can be read (the host reports it and exits 2).
    """
    require_web("dsh team serve")
    from dsh_team.web.serve import serve_followed, serve_stored  # the web extra is needed only here

    reader = env.open_store(args.data_dir)
    team_id = lead_of(reader, args.session_id or reader.latest_root())
    stored = reader.read(team_id, salvage=True)
    if isinstance(reader, FollowingReader):  # a shared store: another process may be running the Team
        return await serve_followed(stored, reader, host=args.host, port=args.port)
    return await serve_stored(stored, reader, host=args.host, port=args.port, worktrees=env.worktrees())
