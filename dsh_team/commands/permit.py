"""``dsh team permit``: the user answers a permission ask of a stopped run.

::

    dsh team permit ID allow|deny [--always] [--reason TEXT] [--data-dir D] [--team SESSION_ID]

The answer is decided by the same pure rule every live answerer goes through
(:func:`~dsh_team.permissions.decide.decide_permission`, ``by: "user"``) on the
Lead log folded from disk, and appended as one ``permission/answered`` record
through the host's CLI write (:meth:`host_spec.cli.CliEnv.open_appender`: under
the Team's lock, fsynced). ``dsh resume`` then finds the answer: the member's
held call runs once if allowed, or is told it was denied. A run live in another
process holds the lock, and the command refuses with ``TEAM_RUN_LIVE`` (answer in
its ``dsh chat`` with ``/permit``, or on its web panel's Permissions card): only the process that holds
the Team appends to its Lead log, which keeps "answered exactly once" simple.
"""

from __future__ import annotations

from typing import Any

from host_spec.cli import HANDLER_KEY, CliEnv
from host_spec.errors import SessionLockedError

from dsh_team.permissions.decide import AnswerCommand, decide_permission
from dsh_team.permissions.ledger import replay_permissions
from dsh_team.permissions.records import PERMISSION_ANSWERED, AnsweredRecord
from dsh_team.errors import MemberCommandError

__all__ = ["register_permit", "permit_command"]


def register_permit(commands: Any, env: CliEnv, lead_of: Any) -> None:
    """Add ``team permit`` to the ``dsh team`` sub-parsers."""
    permit = commands.add_parser(
        "permit", help="answer a permission ask of a stopped run (the member goes on when it resumes)",
        description="Allow or deny an open permission ask (dsh team show lists them); dsh resume then runs "
                    "the call once, or tells the member it was denied.",
    )  # fmt: skip
    env.add_data_dir(permit)
    permit.add_argument("ask_id", help="the ask's id (ask-N)")
    permit.add_argument("decision", choices=("allow", "deny"))
    permit.add_argument("--always", action="store_true", help="allow calls like this one for the rest of the session")
    permit.add_argument("--reason", default="", help="why (the member is told)")
    permit.add_argument("--team", default=None, metavar="SESSION_ID", help="Lead session id (default: the most recent root)")
    permit.set_defaults(**{HANDLER_KEY: lambda args: permit_command(args, env, lead_of)})


def permit_command(args: Any, env: CliEnv, lead_of: Any) -> int:
    """Decide, append, print the answer.

    Raises:
        DshError: ``TEAM_RUN_LIVE``, ``PERMISSION_NOT_FOUND``, ``PERMISSION_ALREADY_ANSWERED``,
            ``TEAM_STREAM_FAILED``, ``TEAM_INVALID_ARGUMENT``, the store's errors.
    """
    reader = env.open_store(args.data_dir)
    team_id: str = lead_of(reader, args.team or reader.latest_root())
    try:
        appender = env.open_appender(args.data_dir, team_id)
    except SessionLockedError:
        raise MemberCommandError(
            f"the run of Team {team_id} is live in another process; answer in its dsh chat (/permit) or its "
            "web panel, or stop the run first",
            code="TEAM_RUN_LIVE",
        ) from None
    try:
        state = replay_permissions(appender.events, team_id)
        answer = "always" if args.always and args.decision == "allow" else args.decision
        record = decide_permission(state, AnswerCommand(args.ask_id, answer, "user", args.reason))
        assert isinstance(record, AnsweredRecord)  # an answer always records
        appender.append(PERMISSION_ANSWERED, record)
    finally:
        appender.close()
    request = state.asks[args.ask_id].request
    print(f"{args.ask_id} ({request.member}: {request.tool}) {record.decision} by the user; "
          "`dsh resume` continues the member")  # fmt: skip
    return 0
