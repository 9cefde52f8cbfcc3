"""The durable records of permission asks: ``permission/requested`` and ``permission/answered``.

They live in the Lead log, the Team's source of truth, beside the Team records,
and are folded by :mod:`dsh_team.permissions.ledger` (like the controls records:
an ask changes no roster, board or mailbox). ``requested`` is durable before the
asking member's call runs anything; ``answered`` is written once, by whoever
answered first (the user, the Lead when the profile delegates, or the deadline).
Payloads are strict (``forbid_unknown_fields``) and versioned.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

import msgspec

from dsh_team.config import MAX_SAFE_INTEGER

__all__ = [
    "PERMISSIONS_VERSION",
    "PERMISSION_REQUESTED",
    "PERMISSION_ANSWERED",
    "PERMISSION_EVENT_TYPES",
    "ASK_ID_PREFIX",
    "Answerer",
    "RequestedRecord",
    "AnsweredRecord",
    "decode_permission",
]

PERMISSIONS_VERSION: Final = 1
PERMISSION_REQUESTED: Final = "permission/requested"
PERMISSION_ANSWERED: Final = "permission/answered"
PERMISSION_EVENT_TYPES: Final = frozenset({PERMISSION_REQUESTED, PERMISSION_ANSWERED})
#: Ask ids are ``ask-1``, ``ask-2`` ... in the order the Team recorded them (short enough to type).
ASK_ID_PREFIX: Final = "ask-"
#: Who may answer: the user (chat, web panel, ``dsh team permit``, an editor), the Lead, the deadline.
Answerer = Literal["user", "lead", "deadline"]

_Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]
_Id = Annotated[str, msgspec.Meta(min_length=1)]
_STRICT: Final[Mapping[str, Any]] = MappingProxyType(
    {"frozen": True, "forbid_unknown_fields": True, "omit_defaults": True, "gc": False}
)


class RequestedRecord(msgspec.Struct, **_STRICT):
    """Payload of ``permission/requested``: ``member`` asks to call ``tool`` with ``arguments``.

    Attributes:
        ask_id: ``ask-N``, N the Team's count of requests so far plus one.
        key: The host's per-call key (member id, turn, step, call id): one request per call.
        member, member_id: The asking member's name and session id.
        tool, arguments: The call (arguments as the model sent them, JSON text).
        rule: The permission rule that asked (``default``: none named the call).
        deadline: Unix time in ms at which the ask is denied unanswered.
        route: Who is asked: ``user``, or ``lead`` (delegated; the user may still answer).
        always_rule: The session rule an "allow always" answer adds (``""``: none).
    """

    version: _Count
    team_id: _Id
    ask_id: _Id
    key: _Id
    member: _Id
    member_id: _Id
    tool: _Id
    arguments: str
    rule: _Id
    deadline: _Count
    route: Literal["user", "lead"] = "user"
    always_rule: str = ""


class AnsweredRecord(msgspec.Struct, **_STRICT):
    """Payload of ``permission/answered``: the one answer of ``ask_id``.

    ``always`` (an allow only) adds the request's ``always_rule`` to the member's
    session rules: later calls it covers run without asking.
    """

    version: _Count
    team_id: _Id
    ask_id: _Id
    decision: Literal["allow", "deny"]
    by: Answerer
    reason: str = ""
    always: bool = False


PermissionRecord = RequestedRecord | AnsweredRecord

_DECODERS: Final[Mapping[str, msgspec.json.Decoder[Any]]] = {
    PERMISSION_REQUESTED: msgspec.json.Decoder(RequestedRecord),
    PERMISSION_ANSWERED: msgspec.json.Decoder(AnsweredRecord),
}


def decode_permission(event_type: str, data: bytes | msgspec.Raw) -> PermissionRecord:
    """Strictly decode a permission record.

    Raises:
        KeyError: not a permission event type.
        msgspec.DecodeError: malformed payload (``ValidationError`` included).
    """
    record: PermissionRecord = _DECODERS[event_type].decode(data)
    return record
