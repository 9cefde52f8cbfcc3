"""``dsh acp``: serve the Lead to an editor over the Agent Client Protocol on stdin/stdout (extra ``acp``).

::

    dsh acp --model llm:gpt-4o-mini [--profile agent-teams] [--data-dir D] [--store URL]

The editor starts this command and speaks JSON-RPC on its standard input and
output (Zed's ``agent_servers``, Neovim's CodeCompanion; see ``docs/editors.md``).
Each editor session is a run: ``session/new`` starts one in the editor's working
directory, ``session/load`` continues a stored one as ``dsh resume`` would. The
flags mean what they mean for ``dsh run`` and ``dsh chat``; on ``session/load``
the run's recorded profile and model are used unless given.

This module imports no SDK: the command imports it when it runs, so ``dsh``
starts without the extra, and ``dsh acp`` without it fails with
``EXTRA_NOT_INSTALLED`` (exit 2) naming the install command. It reaches the
``dsh`` parser as a CLI extension (entry point ``dsh.cli`` ``acp``), like any
plugin's command: the ACP room builds on the CLI's run set-up (run settings,
store readers), so the CLI must not import it back.
"""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import Any

from host_spec.cli import HANDLER_KEY, CliEnv
from host_spec.extras import require

__all__ = ["register", "run"]


def register(commands: Any, env: CliEnv) -> None:
    """Register ``dsh acp`` (the ``dsh.cli`` entry point)."""
    sub = commands.add_parser("acp", help="serve the Lead to an editor (Agent Client Protocol over stdio)",
                              description="An Agent Client Protocol agent on stdin/stdout: each editor session "
                                          "is a Team run (docs/editors.md).")
    sub.add_argument("--profile", default=None,
                     help="profile name or .toml (default: the session's own on session/load, else agent-teams)")
    sub.add_argument("--model", default=None,
                     help="model spec: llm:MODEL, openai:MODEL, scripted:FILE (needed for session/new; "
                          "default on session/load: the session's)")
    env.add_data_dir(sub)
    sub.set_defaults(**{HANDLER_KEY: run})


async def run(args: argparse.Namespace) -> int:
    """``dsh acp``: serve until the editor closes the connection; exit status 0.

    Raises:
        ExtraNotInstalledError: ``EXTRA_NOT_INSTALLED`` without the ``acp`` extra.
    """
    require("acp", extra="acp", feature="dsh acp")  # the agent-client-protocol SDK
    from host_spec.host.acp.server import serve
    from host_spec.host.acp.session import AcpOptions

    options = AcpOptions(data_dir=args.data_dir, profile=args.profile, model=args.model, store=args.store)
    return await serve(options, _version())


def _version() -> str:
    """The installed ``dsh-team`` version the agent reports in ``initialize`` (as ``dsh --version``)."""
    try:
        return metadata.version("dsh-team")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown"
