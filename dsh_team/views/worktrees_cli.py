"""``dsh team diff MEMBER``: what merging a member's worktree would change, read from git.

::

    dsh team diff [--data-dir D] [--team SESSION_ID] MEMBER

The member's ``team/worktree`` record in the Lead log names its branch and
worktree; the host's git (:class:`host_spec.worktrees.Worktrees`, through the CLI
``env``) prints its branch against the merge base with the Lead's branch, then its
uncommitted changes. Nothing is written to the Team's logs.
"""

from __future__ import annotations

import argparse
from typing import Any

from host_spec.cli import HANDLER_KEY, CliEnv
from host_spec.errors import DshError

from dsh_team.core.fold import replay
from dsh_team.worktrees.report import recorded_worktrees
from dsh_team.worktrees.room import spot_of

__all__ = ["register_worktree_commands", "diff_command"]


class DiffError(DshError):
    """``dsh team diff`` of a member without a worktree (``TEAM_NO_WORKTREE``)."""

    code = "TEAM_NO_WORKTREE"


def register_worktree_commands(commands: Any, env: CliEnv, lead_of: Any) -> None:
    """Add ``diff`` to the ``dsh team`` group."""
    diff = commands.add_parser(
        "diff", help="what merging a worktree member's branch would change",
        description="Print MEMBER's branch against the Lead's (from the merge base), then its uncommitted changes.",
    )
    env.add_data_dir(diff)
    diff.add_argument("--team", default=None, metavar="SESSION_ID", help="Lead session id (default: the most recent root)")
    diff.add_argument("member", help="a teammate's name")
    diff.set_defaults(**{HANDLER_KEY: lambda args: diff_command(args, env, lead_of)})


def diff_command(args: argparse.Namespace, env: CliEnv, lead_of: Any) -> int:
    """Print the diff; 0 once printed.

    Raises:
        DshError: ``TEAM_NO_WORKTREE`` (no such member, or it works in the shared checkout),
            the host's git errors.
    """
    reader = env.open_store(args.data_dir)
    team_id = lead_of(reader, args.team or reader.latest_root())
    events = reader.read(team_id, salvage=True).events
    state = replay(events, team_id)
    by_name = {record.member: record for record in recorded_worktrees(events, team_id).values()}
    record = by_name.get(args.member)
    git = env.worktrees()
    if record is None or git is None:
        names = ", ".join(sorted(by_name)) or "none"
        known = args.member in state.members.names
        why = "works in the shared checkout" if known else "is no teammate"
        raise DiffError(f"{args.member} {why}: no worktree to diff (members with one: {names})")
    text = git.diff(record.root, spot_of(record))
    print(text if text else f"{args.member}: nothing to merge ({record.branch} is in the Lead's branch)")
    return 0
