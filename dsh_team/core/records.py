"""Durable Team records: the payload Structs of the seven ``team/*`` event types.

Every record is appended to the Lead (root) session only and carries its
``version`` (:data:`VERSION` for records written now) and ``team_id`` (the Lead
session id). Keys are snake_case. Payloads are strict (``forbid_unknown_fields``):
replay must reject a record it does not fully understand instead of guessing; an
older version is first brought to the current shape by :mod:`dsh_team.core.upcast`. Content blocks
are plain dicts (:mod:`host_spec.messages`) checked by :func:`validate_content`
while decoding, so an unknown block kind survives unchanged.

Decoders are built once at import; :func:`decode_payload` is the fold's fast path
for current records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

import msgspec

from dsh_team.config import MAX_SAFE_INTEGER

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
    "MemberPhase",
    "TaskStatus",
    "TeamMemberSnapshot",
    "TeamTaskSnapshot",
    "TeamMessageSnapshot",
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
    "numeric_task_number",
    "validate_content",
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

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
SafeCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]
SafePositive = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]

MemberPhase = Literal["provisioning", "active", "failed"]
TaskStatus = Literal["pending", "in_progress", "completed", "deleted"]

_TASK_PREFIX: Final = "task-"
_MEDIA_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})


def numeric_task_number(task_id: str) -> int | None:
    """``n`` for a standard id ``task-<n>`` (``n`` >= 1, no leading zero), else ``None``.

    The number may exceed the safe range here; :class:`TeamTaskSnapshot` rejects
    such ids while decoding.
    """
    if not task_id.startswith(_TASK_PREFIX):
        return None
    digits = task_id[5:]
    if not digits or not digits.isascii() or not digits.isdigit() or digits[0] == "0":
        return None
    return int(digits)


# ---------------------------------------------------------------- content blocks


def _is_int(value: Any, low: int) -> bool:
    return type(value) is int and low <= value <= MAX_SAFE_INTEGER


def _check_block(block: Any) -> None:
    if not isinstance(block, dict):
        raise ValueError("content block must be an object")
    kind = block.get("type")
    if not isinstance(kind, str) or not kind:
        raise ValueError("content block type must be a non-empty string")
    if kind in ("text", "reasoning"):
        if not isinstance(block.get("text"), str):
            raise ValueError(f"{kind} content block needs a string text")
    elif kind == "tool-call":
        call_id = block.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError("tool-call content block needs a non-empty id")
        if not isinstance(block.get("name"), str) or not isinstance(block.get("arguments"), str):
            raise ValueError("tool-call content block needs a string name and arguments")
    elif kind == "image":
        _check_attachment(block.get("attachment"))
    elif kind == "tool-result":
        raise ValueError("tool-result content blocks are retired")
    # Any other non-empty kind is a merge-extensible block: kept opaque.


def _check_attachment(attachment: Any) -> None:
    if not isinstance(attachment, dict):
        raise ValueError("image content block needs an attachment object")
    attachment_id = attachment.get("attachment_id")
    if not isinstance(attachment_id, str) or not attachment_id:
        raise ValueError("image attachment needs a non-empty attachment_id")
    if attachment.get("media_type") not in _MEDIA_TYPES:
        raise ValueError("image attachment media_type must be png, jpeg, webp or gif")
    if not _is_int(attachment.get("bytes"), 0):
        raise ValueError("image attachment bytes must be a non-negative safe integer")
    if not (_is_int(attachment.get("width"), 1) and _is_int(attachment.get("height"), 1)):
        raise ValueError("image attachment width and height must be positive safe integers")
    if "name" in attachment and not isinstance(attachment["name"], str):
        raise ValueError("image attachment name must be a string")


def validate_content(blocks: Sequence[Any]) -> None:
    """Check every block of a message's content.

    Core kinds (``text``, ``reasoning``, ``image``, ``tool-call``) must be well
    formed (extra keys are kept); ``tool-result`` is retired and rejected; any
    other object with a non-empty string ``type`` is kept opaque.

    Raises:
        ValueError: the first malformed block (decoding turns it into a
            ``msgspec.ValidationError``).
    """
    for block in blocks:
        _check_block(block)


# ---------------------------------------------------------------- snapshots

# Snapshots and records are built with ``gc=False``: they hold only strings, numbers
# and JSON values, so they can never be part of a reference cycle, and a long-lived
# Team's folded state (its open messages, its tasks) costs the cyclic collector nothing.


class TeamMemberSnapshot(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """One roster record: a teammate's identity and provisioning phase."""

    id: NonEmpty
    name: NonEmpty
    description: str
    provider: str
    context: Literal["fresh", "fork"]
    phase: MemberPhase
    error: str | None = None


class TeamTaskSnapshot(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """A whole task value; every mutation writes the next ``revision`` in full."""

    id: NonEmpty
    revision: SafePositive
    subject: str
    description: str
    status: TaskStatus
    blocked_by: tuple[NonEmpty, ...]
    write_scopes: tuple[str, ...]
    owner_id: NonEmpty | None = None

    def __post_init__(self) -> None:
        # Only ids longer than "task-" + 15 digits can leave the safe range.
        if len(self.id) > 20:
            number = numeric_task_number(self.id)
            if number is not None and number > MAX_SAFE_INTEGER:
                raise ValueError(f"task id {self.id} is outside the safe integer range")


class TeamMessageSnapshot(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A queued peer message; ``content`` is the sender's blocks without the frame."""

    id: NonEmpty
    sender_id: NonEmpty
    sender_name: str
    target_id: NonEmpty
    content: tuple[dict[str, Any], ...]

    def __post_init__(self) -> None:
        validate_content(self.content)


# ---------------------------------------------------------------- records (event payloads)

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
