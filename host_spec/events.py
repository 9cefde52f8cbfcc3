"""The session event envelope, the log header, and the core payloads.

A session log is a header followed by events. Every event carries ``seq``
(contiguous per session, from 1), ``time`` (epoch milliseconds), ``type``, ``data``
and ``cause`` (which agent and which tool call appended it). ``data`` is kept as
raw JSON bytes (:class:`msgspec.Raw`): decoding a log costs one pass, payloads are
decoded lazily by type with :func:`decode_data`, and unknown types round-trip
byte-for-byte. Encoders and decoders are built once at import.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeVar

import msgspec

from host_spec.errors import InvalidEventError
from host_spec.messages import Usage

__all__ = [
    "SESSION_FORMAT_VERSION",
    "EventType",
    "Cause",
    "Event",
    "SessionHeader",
    "TurnStart",
    "TurnEnd",
    "StepMark",
    "ToolCallRecord",
    "InboxSplice",
    "SubagentDescriptor",
    "ContextCompaction",
    "encode_data",
    "decode_data",
    "encode_event",
    "encode_event_lines",
    "decode_event",
    "decode_header",
    "encode_header",
    "json_encode",
    "json_decode",
]

SESSION_FORMAT_VERSION: Final = 0

T = TypeVar("T")


class EventType:
    """Event type strings used by the host. Plugins add their own (``team/...``)."""

    TURN_START: Final = "turn/start"
    TURN_END: Final = "turn/end"
    STEP_START: Final = "step/start"
    STEP_END: Final = "step/end"
    USER_MESSAGE: Final = "user/message"
    ASSISTANT_MESSAGE: Final = "assistant/message"
    TOOL_CALL: Final = "tool/call"
    TOOL_RESULT: Final = "tool/result"
    INBOX_SPLICED: Final = "agent/inbox/spliced"
    SUBAGENT_DESCRIPTOR: Final = "subagent/descriptor"
    END_SEED: Final = "session/end-seed"
    CONTEXT_COMPACTED: Final = "context/compacted"

    #: Types that form the conversation a model sees.
    SURFACE: Final = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})


class Cause(msgspec.Struct, frozen=True, omit_defaults=True):
    """Who appended an event: the agent and, inside a tool call, the call and tool."""

    agent_id: str | None = None
    call_id: str | None = None
    tool: str | None = None


class Event(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """One committed (or candidate) session event.

    Attributes:
        seq: Position in the session log, contiguous from 1.
        time: Epoch milliseconds assigned at append.
        type: Event type string (``turn/start``, ``team/task`` ...).
        data: Raw JSON bytes of the payload; decode with :meth:`decode` or :meth:`value`.
        cause: Agent and tool call that appended the event, when known.
    """

    seq: int
    time: int
    type: str
    data: msgspec.Raw
    cause: Cause | None = None

    def value(self) -> Any:
        """Decode ``data`` into builtin Python objects (dict, list, str ...)."""
        return _builtin_decoder.decode(self.data)

    def decode(self, typ: builtins.type[T]) -> T:
        """Decode ``data`` strictly into ``typ`` (raises ``msgspec.ValidationError``)."""
        return decode_data(self.data, typ)


class SessionHeader(msgspec.Struct, frozen=True, omit_defaults=True):
    """Line 1 of a session log; immutable, never an event.

    ``seed_length`` counts the leading events inherited from a parent (a fork prefix):
    every reader of a session's *own* work slices ``events[seed_length:]``.
    """

    id: str
    created_at: int
    type: Literal["session"] = "session"
    version: int = SESSION_FORMAT_VERSION
    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int = 0
    origin: str | None = None
    delegation_depth: int = 0


# ---------------------------------------------------------------- core payloads


class TurnStart(msgspec.Struct, frozen=True):
    turn: int


class TurnEnd(msgspec.Struct, frozen=True):
    """``reason`` is ``{"kind": "completed"|"aborted"|"blocked"|"error"|"interrupted", ...}``."""

    turn: int
    reason: dict[str, Any]


class StepMark(msgspec.Struct, frozen=True):
    """Payload of ``step/start`` and ``step/end``."""

    turn: int
    step: int


class ToolCallRecord(msgspec.Struct, frozen=True):
    """Payload of ``tool/call``: the call as the model made it (``arguments`` is raw JSON text)."""

    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class InboxSplice(msgspec.Struct, frozen=True, omit_defaults=True):
    """Payload of ``agent/inbox/spliced``: the durable fact behind every inbox change.

    ``inserted`` holds whole user messages (``{"id", "role", "content", "source"}``);
    ``removed_ids`` names items that left the queue (claimed into a turn, or
    discarded when ``outcome`` is ``"canceled"``). Replaying the splices of a
    session's own suffix rebuilds both queues exactly.
    """

    target: Literal["next-turn", "next-step"]
    inserted: list[dict[str, Any]] = []
    removed_ids: list[str] = []
    outcome: Literal["claimed", "canceled"] | None = None


class SubagentDescriptor(msgspec.Struct, frozen=True, omit_defaults=True):
    """Payload of ``subagent/descriptor`` (version 2): how a child may be resumed.

    ``name`` is the agent name the child runs under (the scripted model keys its
    script by it: a teammate's Team name); absent means ``label``. A cold resume
    reads it back so the resumed agent keeps its name. ``role`` is the role the
    child was started with (absent: none): the host keys per-role settings on it,
    such as its sandbox policy, so a resumed or remote member keeps them.
    """

    version: int
    mode: Literal["continuable", "one-shot"]
    provider: str
    label: str | None = None
    agent_model: str | None = None
    name: str | None = None
    role: str | None = None


class ContextCompaction(msgspec.Struct, frozen=True, omit_defaults=True):
    """Payload of ``context/compacted`` (version 1): older turns replaced by one summary.

    Log-only: it rewrites no event. The conversation a model sees is derived from it:
    the message at ``first_seq`` (a session's first own message, which carries its
    identity), then ``summary`` as one user message, then every surface event from
    ``kept_from_seq`` on, verbatim. Everything between was summarised and stays in the
    log. ``kept_from_seq`` is always a cut that keeps each tool call with its result.
    A later compaction supersedes an earlier one (its summary covered the earlier one).

    Attributes:
        version: Payload version (1).
        summary: What the model itself wrote about the summarised turns.
        first_seq: Seq of the first message, kept verbatim.
        kept_from_seq: Seq of the first surface event kept verbatim.
        summarised: How many context messages the summary replaced.
        estimated_tokens: The context estimate (tokens) that crossed the threshold.
        window: The model's context window (tokens) it was measured against.
        usage: What the summary call cost, when the adapter reports it.
        model: ``KIND:MODEL`` that wrote the summary, when reported.
    """

    version: int
    summary: str
    first_seq: int
    kept_from_seq: int
    summarised: int
    estimated_tokens: int
    window: int
    usage: Usage | None = None
    model: str | None = None


# ---------------------------------------------------------------- codec (built once)

_encoder: Final = msgspec.json.Encoder()
_builtin_decoder: Final = msgspec.json.Decoder()
_event_decoder: Final = msgspec.json.Decoder(Event)
_header_decoder: Final = msgspec.json.Decoder(SessionHeader)
_typed_decoders: dict[type, msgspec.json.Decoder[Any]] = {}


def json_encode(value: Any) -> bytes:
    """Encode any JSON-able value (Structs included) with the shared encoder."""
    return _encoder.encode(value)


def json_decode(data: bytes | str) -> Any:
    """Decode JSON into builtins with the shared decoder."""
    return _builtin_decoder.decode(data)


def _check_lossless(value: Any, path: str = "$") -> None:
    """Reject values that JSON would not round-trip (NaN, infinities, non-str keys)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidEventError(f"event data is not lossless JSON: non-finite number at {path}")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidEventError(f"event data is not lossless JSON: non-string key at {path}")
            _check_lossless(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_lossless(item, f"{path}[{index}]")


def encode_data(data: Any) -> msgspec.Raw:
    """Snapshot an event payload as raw JSON bytes.

    Structs are encoded directly (their fields are typed, so no deep walk is
    needed); builtin containers are checked for lossless JSON first.

    Raises:
        InvalidEventError: the payload is not lossless JSON.
    """
    if isinstance(data, msgspec.Raw):
        return data
    if not isinstance(data, msgspec.Struct):
        # Fast path: a payload that decodes back equal to itself is lossless (NaN,
        # non-str keys and the like never compare equal). Only the rest is walked,
        # to reject it with a precise path or accept what equality cannot judge.
        try:
            raw = _encoder.encode(data)
        except (TypeError, msgspec.EncodeError):
            raw = None
        if raw is not None and _builtin_decoder.decode(raw) == data:
            return msgspec.Raw(raw)
        _check_lossless(data)
    try:
        return msgspec.Raw(_encoder.encode(data))
    except (TypeError, msgspec.EncodeError) as exc:
        raise InvalidEventError(f"event data is not lossless JSON: {exc}") from exc


def decode_data(data: msgspec.Raw | bytes, typ: type[T]) -> T:
    """Strictly decode a raw payload into ``typ`` with a decoder cached per type."""
    decoder: msgspec.json.Decoder[T] | None = _typed_decoders.get(typ)
    if decoder is None:
        decoder = _typed_decoders[typ] = msgspec.json.Decoder(typ)
    return decoder.decode(data)


def encode_event(event: Event) -> bytes:
    """One JSONL line (without the newline) for ``event``."""
    return _encoder.encode(event)


def encode_event_lines(events: Sequence[Event]) -> bytes:
    """JSONL lines for ``events``, each ending in a newline, in one encoder call."""
    return _encoder.encode_lines(events)


def decode_event(line: bytes | str) -> Event:
    """Decode one JSONL event line (raises ``msgspec.DecodeError`` / ``ValidationError``)."""
    return _event_decoder.decode(line)


def encode_header(header: SessionHeader) -> bytes:
    return _encoder.encode(header)


def decode_header(line: bytes | str) -> SessionHeader:
    return _header_decoder.decode(line)
