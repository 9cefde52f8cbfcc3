"""``dsh team``: the Team's commands on the host's command line, each room's subcommand registered once.

::

    dsh team show [--data-dir D] [SESSION_ID] [--json] [--at SEQ]      # the Team folded offline (views/cli.py)
    dsh team serve [--data-dir D] [SESSION_ID] [--host H] [--port P]   # the browser panel (web/serve_cli.py)
    dsh team serve --store URL [SESSION_ID]     # the same, followed live while another process runs the Team
    dsh team plan approve|reject NAME [--feedback TEXT]   # a plan decision while no run is live (commands/plan.py)
    dsh team send [--data-dir D] [--team SESSION_ID] MEMBER TEXT       # the user's message (commands/send.py)
    dsh team transcript [--data-dir D] [--team SESSION_ID] MEMBER      # one member's conversation (views/transcript.py)
    dsh team diff [--data-dir D] [--team SESSION_ID] MEMBER            # a worktree member's work (views/worktrees_cli.py)
    dsh team permit ID allow|deny [--always]                          # a permission ask (commands/permit.py)

Registered with the host's command line through entry-point group ``dsh.cli``
(:mod:`host_spec.cli`): the host never imports this package, and the commands
never import the host -- they read and write logs through the ``env`` the host
passes in. This module sits above the rooms it assembles (the read models of
``views``, the writers of ``commands``, the panel of ``web``), so none of them
needs to import another's command to be part of ``dsh team``.
"""

from __future__ import annotations

from typing import Any

from host_spec.cli import CliEnv

from dsh_team.commands.permit import register_permit
from dsh_team.commands.plan import register_plan
from dsh_team.commands.send import register_send
from dsh_team.views.cli import lead_of, register_show
from dsh_team.views.transcript import register_transcript
from dsh_team.views.worktrees_cli import register_worktree_commands

__all__ = ["register"]


def register(subparsers: Any, env: CliEnv) -> None:
    """Add ``team`` and its subcommands to the ``dsh`` parser (the ``dsh.cli`` entry point)."""
    # Imported here, when the parser is built: the dsh-team plugin's own modules never import the
    # web panel's, so a hot reload of an edited panel module reloads the panel plugin alone.
    from dsh_team.web.serve_cli import register_serve

    team = subparsers.add_parser("team", help="inspect Agent Teams stored in a data directory",
                                 description="Inspect Agent Teams stored in a data directory; talk to a member; "
                                             "decide on a plan between runs (team plan).")
    commands = team.add_subparsers(dest="team_command", required=True, metavar="COMMAND")
    register_show(commands, env)
    register_serve(commands, env)
    register_plan(commands, env)
    register_send(commands, env, lead_of)
    register_transcript(commands, env, lead_of)
    register_worktree_commands(commands, env, lead_of)
    register_permit(commands, env, lead_of)
