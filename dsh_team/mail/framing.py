"""How a Team message looks to its target: the framed content, its source and its id.

The target of a peer message sees it as a user message whose first block names
the Team message and its sender (``Team message <id> from <sender>:``) and whose
source (``kind: team-message``) carries the Team and message ids: the durable key
that lets delivery recognise a message the target already holds.

Two senders are no member. The *user* (``dsh team send``, the page's message
box) has sender id :data:`USER_SENDER`: its message is framed ``Message <id> from
the user:`` and its source kind is the core ``user`` (carrying the same Team and
message ids), so the target reads it as the user speaking, never as a teammate.
The *Team* itself (:data:`NOTICE_SENDER`) tells the Lead of a member's failed
turn: ``Team notice <id>:``. Both travel the same durable mailbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from host_spec.events import Event
from host_spec.messages import ContentBlock, Source, UserMessage, text_block

from dsh_team.core.snapshots import TeamMessageSnapshot

__all__ = [
    "MESSAGE_ID_PREFIX",
    "TEAM_MESSAGE_SOURCE",
    "USER_SENDER",
    "NOTICE_SENDER",
    "SYSTEM_SENDERS",
    "delivered_content",
    "framed_content",
    "team_source",
    "team_user_message",
    "recorded_team_message",
]

#: Every Team message id starts with this (a uuid follows).
MESSAGE_ID_PREFIX: Final = "team-message-"
#: Source kind of a delivered Team message.
TEAM_MESSAGE_SOURCE: Final = "team-message"
#: Sender id (and name) of a message the user sent to a member; no member has this id.
USER_SENDER: Final = "user"
#: Sender id (and name) of the Team's own notices to the Lead; no member has this id.
NOTICE_SENDER: Final = "team"
#: Senders that are no member: they never count as a member's outbox and cannot be answered.
SYSTEM_SENDERS: Final = frozenset({USER_SENDER, NOTICE_SENDER})
#: Source kinds that carry a Team message id (the core ``user`` kind only with a ``team_id``).
_TEAM_KINDS: Final = frozenset({TEAM_MESSAGE_SOURCE, "user"})


def framed_content(message_id: str, sender_name: str, content: Sequence[ContentBlock]) -> list[ContentBlock]:
    """What the target sees: ``Team message <id> from <sender>:`` then the sender's blocks."""
    return [text_block(f"Team message {message_id} from {sender_name}:"), *(dict(block) for block in content)]


def delivered_content(message: TeamMessageSnapshot) -> list[ContentBlock]:
    """What the target of ``message`` sees: framed by its sender (a member, the user, the Team)."""
    if message.sender_id == USER_SENDER:
        return [text_block(f"Message {message.id} from the user:"), *(dict(block) for block in message.content)]
    if message.sender_id == NOTICE_SENDER:
        return [text_block(f"Team notice {message.id}:"), *(dict(block) for block in message.content)]
    return framed_content(message.id, message.sender_name, message.content)


def team_source(team_id: str, message: TeamMessageSnapshot) -> Source:
    """The durable source of a delivered Team message (its de-duplication key).

    The user's message has the core ``user`` kind: it is the user speaking.
    """
    return {
        "kind": "user" if message.sender_id == USER_SENDER else TEAM_MESSAGE_SOURCE,
        "team_id": team_id,
        "message_id": message.id,
        "sender_id": message.sender_id,
        "sender_name": message.sender_name,
    }


def team_user_message(team_id: str, message: TeamMessageSnapshot) -> UserMessage:
    """The target's user message: id = the Team message id, framed content, Team source."""
    return UserMessage(
        id=message.id,
        content=delivered_content(message),
        source=team_source(team_id, message),
    )


class _Source(msgspec.Struct):
    kind: object = None
    team_id: object = None
    message_id: object = None


class _Recorded(msgspec.Struct):
    source: _Source = msgspec.field(default_factory=_Source)


#: Decodes only a user message's source (its content is skipped).
_RECORDED: Final = msgspec.json.Decoder(_Recorded)


def recorded_team_message(event: Event) -> tuple[str, str] | None:
    """``(team id, Team message id)`` of a ``user/message`` event with a Team source, else ``None``.

    The caller checks the event type; anything without a well-formed Team source is ``None``
    (a ``user`` source counts only with the Team and message ids the user's Team mail carries).
    """
    try:
        source = _RECORDED.decode(event.data).source
    except msgspec.DecodeError:
        return None
    if source.kind not in _TEAM_KINDS or not isinstance(source.team_id, str):
        return None
    if not isinstance(source.message_id, str):
        return None
    return source.team_id, source.message_id
