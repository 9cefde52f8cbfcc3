"""``dsh team show``: a stored Team, folded offline from its Lead log.

::

    dsh team show [--data-dir D] [SESSION_ID] [--json] [--at SEQ]

One subcommand of ``dsh team`` (:mod:`dsh_team.cli` registers them all). The host
never imports this package, and this module
never imports the host -- it reads logs through the ``env`` the host passes in
and folds them with :func:`dsh_team.core.fold.replay`, the fold every other reader of
a Team uses. Nothing is locked or written, so it is safe next to a running team
(the writers of a stopped run are :mod:`dsh_team.commands`).

* ``SESSION_ID`` defaults to the most recently created root session. A
  teammate's id shows the Team it belongs to (its parent's roster lists it).
* ``--at SEQ`` folds only the Lead log's events ``1..SEQ``: the Team as it was.
* ``--json`` prints :class:`dsh_team.views.show.TeamShow` (stable snake_case keys).

Exit status: 0 the Team was shown; 2 nothing could be shown (bad data dir,
unknown session, ``--at`` beyond the log, an unreadable log header -- the host
prints ``dsh: <code>: <message>``); 3 the Team was shown but its stream is
corrupt: a Team record broke the fold or the log is damaged, and the output is
the last valid state with the ``failure``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, Final

from host_spec.cli import HANDLER_KEY, CliEnv, SessionReader
from host_spec.errors import DshError, SessionError

from dsh_team.core.fold import replay
from dsh_team.cost.report import build_report
from dsh_team.log.member_records import fold_latest
from dsh_team.roster.roles import ROLE_RECORDS
from dsh_team.roster.shutdown import gone_members
from dsh_team.views.show import build_show, render_json
from dsh_team.views.controls import build_controls
from dsh_team.views.lead_folds import lead_folds
from dsh_team.views.permissions import build_permissions
from dsh_team.views.writes import collect_writes
from dsh_team.views.show_text import render_text
from dsh_team.views.usage import member_usage, uncharged_spend
from dsh_team.worktrees.report import build_worktrees

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_FAILED", "ShowError", "register_show", "show_command", "lead_of",
           "sandbox_line"]

#: The Team was shown.
EXIT_OK: Final = 0
#: Nothing was shown (the host's exit status for every ``DshError``, and argparse's for usage).
EXIT_ERROR: Final = 2
#: The Team was shown up to its last valid state; its stream or log is corrupt.
EXIT_FAILED: Final = 3

_EPILOG: Final = """\
statuses are offline: no process is attached, so active members (and the Lead) show as inactive.
exit status: 0 shown; 2 nothing shown (bad input; 'dsh: <code>: <message>' on stderr);
3 shown, but the Team stream or the log is corrupt: the last valid state and the failure are printed."""


class ShowError(DshError):
    """A ``team show`` request that cannot be answered (``TEAM_SHOW_BAD_POSITION``)."""

    code = "TEAM_SHOW_ERROR"


def _position(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"SEQ must be an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"SEQ must be 0 or more, got {value}")
    return value


def register_show(commands: Any, env: CliEnv) -> None:
    """Add ``team show`` to the ``dsh team`` parser (:func:`dsh_team.cli.register`)."""
    show = commands.add_parser(
        "show", help="roster, task board and pending mail of a Team",
        description="Show a Team's roster, task board and pending mail, folded from its Lead log.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    env.add_data_dir(show)
    show.add_argument("--json", action="store_true", help="print the view as JSON (stable snake_case keys)")
    show.add_argument("--at", type=_position, default=None, metavar="SEQ",
                      help="fold the Lead log only up to event SEQ (the Team as it was then)")
    show.add_argument("session_id", nargs="?", default=None,
                      help="Lead (or teammate) session id (default: the most recent root session)")
    show.set_defaults(**{HANDLER_KEY: lambda args: show_command(args, env)})


def lead_of(reader: SessionReader, session_id: str) -> str:
    """The Team to show for ``session_id``: its parent's when the parent's roster lists it, else its own.

    Raises:
        SessionNotFoundError: ``session_id`` is not stored.
    """
    parent = reader.header(session_id).parent_session
    if parent is None:
        return session_id
    try:
        stored = reader.read(parent, salvage=True)
    except SessionError:
        return session_id  # no readable parent: the session can only lead its own Team
    state = replay(stored.events, parent)
    return parent if session_id in state.members.members else session_id


def show_command(args: argparse.Namespace, env: CliEnv) -> int:
    """Print the Team view; returns :data:`EXIT_OK` or :data:`EXIT_FAILED`.

    Raises:
        DshError: nothing can be shown (the host reports it and exits 2).
    """
    reader = env.open_store(args.data_dir)
    asked = args.session_id or reader.latest_root()
    team_id = lead_of(reader, asked)
    stored = reader.read(team_id, salvage=True)
    length = len(stored.events)
    at = length if args.at is None else args.at
    if at > length:
        damaged = " readable" if stored.damage is not None else ""
        raise ShowError(f"--at {at} is beyond the Lead log of {team_id} ({length}{damaged} events)",
                        code="TEAM_SHOW_BAD_POSITION")
    folds = lead_folds(reader, stored, team_id, at)
    state = folds.state
    damage = None
    if stored.damage is not None:
        if at == length:
            damage = (stored.damage.message, length + 1)
        else:
            print(f"dsh: warning: the Lead log is damaged after seq {length}; seqs 1..{at} are intact",
                  file=sys.stderr)
    # --at: writes and usage up to the time of the Lead's event SEQ (member logs have their own seqs).
    until = None if at == length else stored.events[at - 1].time if at else -1
    writes = collect_writes(reader, state, until=until)
    ids = [team_id, *(member.id for member in state.members.listed())]
    ledger = folds.ledger
    costs = build_report(state, ledger, uncharged_spend(reader, ids, ledger) if until is None else None, stored.events)
    controls = build_controls(folds.controls)
    worktrees = build_worktrees(stored.events[:at], team_id, lambda: env.worktrees())
    permissions = build_permissions(folds.permissions)
    show = build_show(state, session_id=asked, log_length=length, at=at, damage=damage, writes=writes,
                      usage=member_usage(reader, ids, until=until), costs=costs, controls=controls,
                      permissions=permissions, worktrees=worktrees, gone=gone_members(stored.events[:at], team_id))
    print(render_json(show) if args.json else render_text(show))
    if not args.json:
        names = ["lead", *(member.name for member in state.members.listed())]
        records = fold_latest(ROLE_RECORDS, stored.events[:at], team_id, {})
        roles = {m.name: records[m.id].role for m in state.members.listed() if m.id in records}
        print(sandbox_line(env.sandbox_policies(args.data_dir, team_id, names, roles)))
    return EXIT_FAILED if show.failure is not None else EXIT_OK


def sandbox_line(policies: Mapping[str, str] | None) -> str:
    """The view's last line: each member's sandbox policy, and who runs unsandboxed (the host's ``full``)."""
    if policies is None:
        return "Sandbox: unknown (the run recorded no profile)"
    listed = ", ".join(f"{name} {policy}" for name, policy in policies.items())
    unsandboxed = [name for name, policy in policies.items() if policy == "full"]
    return f"Sandbox: {listed}; UNSANDBOXED: {', '.join(unsandboxed) or 'none'}"
