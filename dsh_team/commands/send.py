"""``dsh team send``: the user's message to one member of a stored run, delivered on resume.

::

    dsh team send [--data-dir D] [--team SESSION_ID] MEMBER TEXT

It queues the user's message to ``MEMBER`` (a teammate's name or ``lead``)
in the Lead log of a run that is *not* live: the same ``team/message/queued``
record the running service writes for ``send_from_user`` (sender ``user``),
decided by the same :func:`~dsh_team.mail.admission.decide_send` with the limits
of the run's own profile (a member that shut down is refused, as the live service
refuses it), and checked by the same fold before it is appended and fsynced. The next ``dsh
resume`` delivers it exactly once through the Team's recovery (a sleeping
teammate is resumed from disk to read it). Opening the Lead log takes the
Team's lock; a run live in another process holds it, and the command refuses
with ``TEAM_RUN_LIVE`` and points to the run's web panel, whose message box
sends through the live service. Refusing keeps exactly-once simple: only the
process that holds the Team ever appends to its Lead log.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any, Final

from host_spec.cli import HANDLER_KEY, CliEnv, SessionReader
from host_spec.errors import SessionLockedError
from host_spec.events import Event, encode_data
from host_spec.messages import text_block

from dsh_team.config import TeamConfig
from dsh_team.core.fold import evolve, replay
from dsh_team.core.fold_failure import FoldFailure
from dsh_team.core.records import TEAM_MESSAGE_QUEUED, MessageQueuedRecord
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.core.validation import check_content
from dsh_team.errors import MemberCommandError, TeamCode, TeamError
from dsh_team.mail.admission import decide_send
from dsh_team.mail.framing import MESSAGE_ID_PREFIX, USER_SENDER
from dsh_team.roster.shutdown import gone_members

__all__ = ["PLUGIN_NAME", "register_send", "run_live", "send_command", "lead_team"]

#: The plugin's name in a profile (its ``[dsh-team]`` table holds the limits a message is held to).
PLUGIN_NAME: Final = "dsh-team"


def run_live(team_id: str, instead: str) -> MemberCommandError:
    """``TEAM_RUN_LIVE``: a CLI change to a Team whose run another process holds, and where to make it instead.

    The host's ``SESSION_LOCKED`` says only that the log is held; the user needs the
    way that works while the run is live, which is its web panel.
    """
    return MemberCommandError(
        f"the run of Team {team_id} is live in another process; {instead} (`dsh run --web` prints its address), "
        "or stop the run first",
        code="TEAM_RUN_LIVE",
    )


def register_send(commands: Any, env: CliEnv, lead_of: Any) -> None:
    """Add ``send`` to the ``dsh team`` group."""
    send = commands.add_parser(
        "send", help="send the user's message to a member of a stopped run (delivered on resume)",
        description="Queue the user's message to MEMBER in a stored run's Lead log; `dsh resume` delivers it once. "
                    "A run live in another process is refused: use its web panel's message box.",
    )  # fmt: skip
    env.add_data_dir(send)
    send.add_argument("--team", default=None, metavar="SESSION_ID", help="Lead session id (default: the most recent root)")
    send.add_argument("member", help="a teammate's name, or 'lead'")
    send.add_argument("text", help="the message")
    send.set_defaults(**{HANDLER_KEY: lambda args: send_command(args, env, lead_of)})


def lead_team(reader: SessionReader, asked: str | None, lead_of: Any) -> str:
    """The Team a command addresses: ``--team``, else the most recent root, through ``lead_of``."""
    team_id: str = lead_of(reader, asked or reader.latest_root())
    return team_id


def _queued(state: TeamState, limits: TeamConfig, gone: frozenset[str], member: str, text: str) -> MessageQueuedRecord:
    """The user's queued record for ``member``: the live service's own decision, with the run's limits.

    Raises:
        TeamError: the codes of ``send_from_user`` (no such active member, shut down, mailbox full,
            too large, bad text).
    """
    return decide_send(
        state, limits, gone=gone.__contains__, sender=(USER_SENDER, USER_SENDER), target=member,
        blocks=check_content([text_block(text)]), message_id=f"{MESSAGE_ID_PREFIX}{uuid.uuid4()}",
    )  # fmt: skip


def send_command(args: argparse.Namespace, env: CliEnv, lead_of: Any) -> int:
    """Queue the user's message durably in a stopped run's Lead log; prints its id.

    Raises:
        DshError: ``TEAM_RUN_LIVE`` (the run is live elsewhere), the Team's admission codes,
            ``TEAM_STREAM_FAILED`` (a corrupt Team stream is never appended to), the store's errors.
    """
    reader = env.open_store(args.data_dir)
    team_id = lead_team(reader, args.team, lead_of)
    try:
        appender = env.open_appender(args.data_dir, team_id)
    except SessionLockedError:
        raise run_live(team_id, "send from its web panel's message box") from None
    try:
        events = appender.events
        state = replay(events, team_id)
        if state.failure is not None:
            raise TeamError(f"the Team stream is corrupt ({state.failure.message}); nothing was sent",
                            TeamCode.STREAM_FAILED)  # fmt: skip
        limits = TeamConfig.from_mapping(env.plugin_config(args.data_dir, team_id, PLUGIN_NAME))
        record = _queued(state, limits, gone_members(events, team_id), args.member, args.text)
        # The fold a run's invariant would apply: the record must fold before it is written.
        candidate = Event(seq=len(events) + 1, time=0, type=TEAM_MESSAGE_QUEUED, data=encode_data(record))
        outcome = evolve(state, candidate)
        if isinstance(outcome, FoldFailure):  # pragma: no cover - the admission above is the fold's own rule
            raise TeamError(outcome.message, TeamCode.STREAM_FAILED)
        appender.append(TEAM_MESSAGE_QUEUED, record)
    finally:
        appender.close()
    name = LEAD_NAME if record.message.target_id == team_id else args.member.strip()
    print(f"queued {record.message.id} for {name}; `dsh resume` delivers it once")
    return 0
