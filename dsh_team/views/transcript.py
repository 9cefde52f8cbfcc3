"""``dsh team transcript``: one member's conversation, read from its own log.

::

    dsh team transcript [--data-dir D] [--team SESSION_ID] MEMBER

Read-only and safe next to a running team: the user's and teammates' messages,
the member's answers, its tool calls and results, permission asks, and abnormal
turn ends.
"""

from __future__ import annotations

import argparse
from typing import Any, Final

from host_spec.cli import HANDLER_KEY, CliEnv
from host_spec.events import Event, EventType, json_encode
from host_spec.messages import message_text
from host_spec.permissions import TOOL_PERMISSION

from dsh_team.core.fold import replay
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.errors import MemberCommandError

__all__ = ["register_transcript", "transcript_command", "transcript_lines"]


def register_transcript(commands: Any, env: CliEnv, lead_of: Any) -> None:
    """Add ``transcript`` to the ``dsh team`` group."""
    transcript = commands.add_parser(
        "transcript", help="print one member's conversation",
        description="Print MEMBER's conversation from its own log (read-only).",
    )  # fmt: skip
    env.add_data_dir(transcript)
    transcript.add_argument("--team", default=None, metavar="SESSION_ID",
                            help="Lead session id (default: the most recent root)")
    transcript.add_argument("member", help="a teammate's name, or 'lead'")
    transcript.set_defaults(**{HANDLER_KEY: lambda args: transcript_command(args, env, lead_of)})


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
    team_id: str = lead_of(reader, args.team or reader.latest_root())
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
