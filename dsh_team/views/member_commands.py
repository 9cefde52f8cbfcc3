"""``dsh team send`` and ``dsh team transcript``: talk to one member of a stored run, read its conversation.

::

    dsh team send [--data-dir D] [--team SESSION_ID] MEMBER TEXT
    dsh team transcript [--data-dir D] [--team SESSION_ID] MEMBER

**send** queues the user's message to ``MEMBER`` (a teammate's name or ``lead``)
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

**transcript** prints a member's own conversation from its log (read-only, safe
next to a running team): the user's and teammates' messages, the member's
answers, its tool calls and results, and abnormal turn ends.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any, Final

from host_spec.cli import HANDLER_KEY, CliEnv, SessionReader
from host_spec.errors import DshError, SessionLockedError
from host_spec.events import Event, EventType, encode_data, json_encode
from host_spec.messages import message_text, text_block
from host_spec.permissions import TOOL_PERMISSION

from dsh_team.config import TeamConfig
from dsh_team.core.fold import evolve, replay
from dsh_team.core.fold_failure import FoldFailure
from dsh_team.core.records import TEAM_MESSAGE_QUEUED, MessageQueuedRecord
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.core.validation import check_content
from dsh_team.errors import TeamCode, TeamError
from dsh_team.mail.admission import decide_send
from dsh_team.mail.framing import MESSAGE_ID_PREFIX, USER_SENDER
from dsh_team.roster.shutdown import gone_members

__all__ = ["MemberCommandError", "register_member_commands", "send_command", "transcript_command", "transcript_lines"]

#: The plugin's name in a profile (its ``[dsh-team]`` table holds the limits a message is held to).
PLUGIN_NAME: Final = "dsh-team"


class MemberCommandError(DshError):
    """A ``team send`` / ``team transcript`` / ``team plan`` request that cannot be carried out (the code says why)."""

    code = "TEAM_COMMAND_ERROR"


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


def register_member_commands(commands: Any, env: CliEnv, lead_of: Any) -> None:
    """Add ``send`` and ``transcript`` to the ``dsh team`` group."""
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
    transcript = commands.add_parser(
        "transcript", help="print one member's conversation",
        description="Print MEMBER's conversation from its own log (read-only).",
    )  # fmt: skip
    env.add_data_dir(transcript)
    transcript.add_argument("--team", default=None, metavar="SESSION_ID",
                            help="Lead session id (default: the most recent root)")
    transcript.add_argument("member", help="a teammate's name, or 'lead'")
    transcript.set_defaults(**{HANDLER_KEY: lambda args: transcript_command(args, env, lead_of)})


def _team(reader: SessionReader, asked: str | None, lead_of: Any) -> str:
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
    team_id = _team(reader, args.team, lead_of)
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


# ---------------------------------------------------------------- transcript


def _who(source: Any) -> str:
    if not isinstance(source, dict):
        return "user"
    kind = source.get("kind", "user")
    if kind == "team-message":
        return f"team message from {source.get('sender_name')}"
    return "user" if kind == "user" else f"user ({kind})"


def _entry(lines: list[str], head: str, text: str) -> None:
    """``head: text``; the text's later lines are indented under it, so one entry stays one block."""
    first, *rest = text.splitlines() or [""]
    lines.append(f"{head}: {first}" if first else f"{head}:")
    lines.extend(f"  {line}" for line in rest)


def transcript_lines(events: list[Event]) -> list[str]:
    """The conversation lines of one member's own events (bookkeeping events have none)."""
    lines: list[str] = []
    for event in events:
        if event.type not in _SHOWN:
            continue
        value: dict[str, Any] = event.value()
        if event.type == EventType.USER_MESSAGE:
            text = " ".join(part for part in (b.get("text", "") for b in value.get("content") or [] if b.get("type") == "text"))
            _entry(lines, _who(value.get("source")), text)
        elif event.type == EventType.ASSISTANT_MESSAGE:
            text = message_text(value.get("content") or [])
            if text.strip():
                _entry(lines, "assistant", text)
        elif event.type == EventType.TOOL_CALL:
            lines.append(f"tool call {value.get('name')} {value.get('arguments') or '{}'}")
        elif event.type == EventType.TOOL_RESULT:
            marker = " (error)" if value.get("is_error") else ""
            _entry(lines, f"tool result {value.get('name')}{marker}", message_text(value.get("content") or []))
        elif event.type == TOOL_PERMISSION:
            if value.get("phase") == "asked":
                lines.append(f"permission asked for call {value.get('call_id')} (rule {value.get('rule')})")
            else:
                lines.append(f"permission {value.get('ask_id') or '(session rule)'} allowed by {value.get('by')}")
        else:  # the turn's end
            reason = value.get("reason") or {}
            if reason.get("kind", "completed") != "completed":
                lines.append(f"turn {value.get('turn')} ended: {json_encode(reason).decode()}")
    return lines


_SHOWN: Final = frozenset(
    {EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE, EventType.TOOL_CALL, EventType.TOOL_RESULT, EventType.TURN_END,
     TOOL_PERMISSION}
)


def transcript_command(args: argparse.Namespace, env: CliEnv, lead_of: Any) -> int:
    """Print ``args.member``'s conversation (its own events: a fork's inherited prefix is skipped).

    Raises:
        DshError: ``TEAM_MEMBER_NOT_FOUND`` (no such member), the store's errors.
    """
    reader = env.open_store(args.data_dir)
    team_id = _team(reader, args.team, lead_of)
    name = args.member.strip()
    if name == LEAD_NAME:
        member_id = team_id
    else:
        member = replay(reader.read(team_id, salvage=True).events, team_id).members.by_name(name)
        if member is None:
            raise MemberCommandError(f"Team {team_id} has no member named {name!r}", code="TEAM_MEMBER_NOT_FOUND")
        member_id = member.id
    stored = reader.read(member_id, salvage=True)
    for line in transcript_lines(list(stored.events[stored.header.seed_length:])):
        print(line)
    return 0
