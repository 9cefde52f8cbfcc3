"""Durable Team records: the payload Structs of the seven ``team/*`` event types and their codecs.

Every record is appended to the Lead (root) session only and carries its
``version`` (:data:`VERSION` for records written now) and ``team_id`` (the Lead
session id). Keys are snake_case. Payloads are strict (``forbid_unknown_fields``):
replay must reject a record it does not fully understand instead of guessing; an
older version is first brought to the current shape by :mod:`dsh_team.core.upcast`.
The entity values the records carry are :mod:`dsh_team.core.snapshots`.

Decoders are built once at import; :func:`decode_payload` is the fold's fast path
for current records.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import msgspec

from dsh_team.core.snapshots import NonEmpty, SafeCount, TeamMemberSnapshot, TeamMessageSnapshot, TeamTaskSnapshot

__all__ = [
    "VERSION",
    "TEAM_MEMBER",
    "TEAM_TASK",
    "TEAM_MESSAGE_QUEUED",
    "TEAM_MESSAGE_DELIVERED",
    "TEAM_MESSAGE_READ",
    "TEAM_MODE",
    "TEAM_QUIESCENT",
    "TEAM_EVENT_TYPES",
    "MemberRecord",
    "TaskRecord",
    "MessageQueuedRecord",
    "MessageDeliveredRecord",
    "MessageReadRecord",
    "ModeRecord",
    "StalledTask",
    "TeamStalled",
    "QuiescentRecord",
    "Selector",
    "TeamRecord",
    "RECORD_TYPES",
    "decode_payload",
    "decode_selector",
]

VERSION: Final = 2

TEAM_MEMBER: Final = "team/member"
TEAM_TASK: Final = "team/task"
TEAM_MESSAGE_QUEUED: Final = "team/message/queued"
TEAM_MESSAGE_DELIVERED: Final = "team/message/delivered"
TEAM_MESSAGE_READ: Final = "team/message/read"
TEAM_MODE: Final = "team/mode"
TEAM_QUIESCENT: Final = "team/quiescent"
TEAM_EVENT_TYPES: Final = frozenset(
    {TEAM_MEMBER, TEAM_TASK, TEAM_MESSAGE_QUEUED, TEAM_MESSAGE_DELIVERED, TEAM_MESSAGE_READ, TEAM_MODE, TEAM_QUIESCENT}
)


_STRICT: Final[Mapping[str, Any]] = MappingProxyType({"frozen": True, "forbid_unknown_fields": True, "gc": False})


class MemberRecord(msgspec.Struct, **_STRICT):
    """Payload of ``team/member``."""

    version: SafeCount
    team_id: NonEmpty
    member: TeamMemberSnapshot


class TaskRecord(msgspec.Struct, **_STRICT):
    """Payload of ``team/task``."""

    version: SafeCount
    team_id: NonEmpty
    task: TeamTaskSnapshot


class MessageQueuedRecord(msgspec.Struct, **_STRICT):
    """Payload of ``team/message/queued``.

    ``index`` is the message's queue index, the Team's count of queued records
    before it; the writer sets it from the folded mailbox, so a record appended
    twice carries a stale index and the fold refuses it without remembering every
    id. Records of older builds have none (``None``): the fold numbers them itself.
    """

    version: SafeCount
    team_id: NonEmpty
    message: TeamMessageSnapshot
    index: SafeCount | None = None


class MessageDeliveredRecord(msgspec.Struct, **_STRICT):
    """Payload of ``team/message/delivered``: the target durably holds the message."""

    version: SafeCount
    team_id: NonEmpty
    message_id: NonEmpty
    target_id: NonEmpty


class MessageReadRecord(msgspec.Struct, **_STRICT):
    """Payload of ``team/message/read``: a model step of the target completed with the message in context.

    A read receipt: written at most once per message, only after its delivery.
    """

    version: SafeCount
    team_id: NonEmpty
    message_id: NonEmpty
    target_id: NonEmpty


class ModeRecord(msgspec.Struct, **_STRICT):
    """Payload of ``team/mode``: the root's explicit Team-mode selection."""

    version: SafeCount
    team_id: NonEmpty
    enabled: bool


class StalledTask(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An ``in_progress`` task nobody is working on: its id and owner."""

    id: NonEmpty
    owner_id: NonEmpty


class TeamStalled(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The work a quiescent Team leaves undone, in board (or roster) order.

    Attributes:
        in_progress: Tasks in progress (their owners are idle, inactive or failed).
        ready: Pending tasks whose blockers are all completed, claimed by nobody.
        failed: Ids of members whose provisioning failed.
    """

    in_progress: tuple[StalledTask, ...] = ()
    ready: tuple[NonEmpty, ...] = ()
    failed: tuple[NonEmpty, ...] = ()


class QuiescentRecord(msgspec.Struct, **_STRICT):
    """Payload of ``team/quiescent``: nothing in the Team can progress until someone acts.

    Written once per quiet spell: never twice without a Team change in between.
    """

    version: SafeCount
    team_id: NonEmpty
    stalled: TeamStalled


class Selector(msgspec.Struct, frozen=True):
    """The loose part every Team record shares; decides *whose* record it is first."""

    version: SafeCount
    team_id: NonEmpty


TeamRecord = (
    MemberRecord | TaskRecord | MessageQueuedRecord | MessageDeliveredRecord | MessageReadRecord | ModeRecord
    | QuiescentRecord
)

#: The payload Struct of each Team event type (read-only).
RECORD_TYPES: Final[Mapping[str, type[TeamRecord]]] = MappingProxyType(
    {
        TEAM_MEMBER: MemberRecord,
        TEAM_TASK: TaskRecord,
        TEAM_MESSAGE_QUEUED: MessageQueuedRecord,
        TEAM_MESSAGE_DELIVERED: MessageDeliveredRecord,
        TEAM_MESSAGE_READ: MessageReadRecord,
        TEAM_MODE: ModeRecord,
        TEAM_QUIESCENT: QuiescentRecord,
    }
)
_DECODERS: Final[Mapping[str, msgspec.json.Decoder[Any]]] = MappingProxyType(
    {event_type: msgspec.json.Decoder(record) for event_type, record in RECORD_TYPES.items()}
)
_SELECTOR: Final = msgspec.json.Decoder(Selector)


def decode_payload(event_type: str, data: bytes | msgspec.Raw) -> Any:
    """Strictly decode the payload of a Team event type.

    Raises:
        KeyError: ``event_type`` is not a Team event type.
        msgspec.DecodeError: the payload is malformed (``ValidationError`` included).
    """
    return _DECODERS[event_type].decode(data)


def decode_selector(data: bytes | msgspec.Raw) -> Selector:
    """Decode only ``{version, team_id}``, ignoring every other key.

    Raises:
        msgspec.DecodeError: no usable selector (``ValidationError`` included).
    """
    return _SELECTOR.decode(data)
