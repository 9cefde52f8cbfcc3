"""OTLP JSON: the wire shape of an OpenTelemetry ``ExportTraceServiceRequest``, written with msgspec.

The OTLP/JSON mapping of the protobuf messages, restricted to what a trace export
needs: ``resourceSpans`` / ``scopeSpans`` / ``spans``, lowerCamelCase keys, trace
and span ids as lowercase hex (32 and 16 digits, the OTLP exception to protobuf's
base64 bytes), times as decimal strings of unix nanoseconds, 64-bit integers as
decimal strings, enums as integers, and attribute values typed (``stringValue``,
``boolValue``, ``intValue``, ``doubleValue``, ``arrayValue``). Fields at their
default are omitted, as the mapping allows, so equal spans encode to equal bytes.

Ids are derived, never random: :func:`trace_id_of` hashes a run's root session
id and :func:`span_id_of` a session id and a position in that session's log, so
two exports of the same logs are byte-identical and a span id says which event
opened it. The encoder is built once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import msgspec

__all__ = [
    "SPAN_KIND_INTERNAL",
    "SPAN_KIND_CLIENT",
    "STATUS_UNSET",
    "STATUS_ERROR",
    "AttributeValue",
    "AnyValue",
    "ArrayValue",
    "KeyValue",
    "SpanEvent",
    "SpanLink",
    "SpanStatus",
    "OtlpSpan",
    "InstrumentationScope",
    "ScopeSpans",
    "OtlpResource",
    "ResourceSpans",
    "ExportTraceServiceRequest",
    "attributes",
    "nanos",
    "trace_id_of",
    "span_id_of",
    "encode_request",
]

#: ``Span.SpanKind``: work inside the process (turns, tool calls).
SPAN_KIND_INTERNAL: Final = 1
#: ``Span.SpanKind``: a call to a remote service (a model call).
SPAN_KIND_CLIENT: Final = 3
#: ``Status.StatusCode``: no verdict (the default, omitted).
STATUS_UNSET: Final = 0
#: ``Status.StatusCode``: the operation failed.
STATUS_ERROR: Final = 2

#: What an attribute may hold; a sequence becomes an ``arrayValue`` of strings.
AttributeValue = str | bool | int | float | Sequence[str]

#: OTLP/JSON keys are lowerCamelCase; defaults are omitted. The values hold no cycles, so the
#: garbage collector need not track them (a long run's export allocates hundreds of thousands).
_CAMEL: Final[Mapping[str, Any]] = MappingProxyType({"rename": "camel", "omit_defaults": True, "frozen": True, "gc": False})


class ArrayValue(msgspec.Struct, **_CAMEL):
    """An ``ArrayValue``: the items of an array attribute."""

    values: tuple[AnyValue, ...] = ()


class AnyValue(msgspec.Struct, **_CAMEL):
    """An ``AnyValue``: exactly one of its fields is set (``intValue`` is a decimal string)."""

    string_value: str | None = None
    bool_value: bool | None = None
    int_value: str | None = None
    double_value: float | None = None
    array_value: ArrayValue | None = None


class KeyValue(msgspec.Struct, **_CAMEL):
    """One attribute."""

    key: str
    value: AnyValue


class SpanEvent(msgspec.Struct, **_CAMEL):
    """A ``Span.Event``: something that happened at one instant inside a span."""

    time_unix_nano: str
    name: str
    attributes: tuple[KeyValue, ...] = ()


class SpanLink(msgspec.Struct, **_CAMEL):
    """A ``Span.Link``: a causal pointer from one span to another (of any trace)."""

    trace_id: str
    span_id: str
    attributes: tuple[KeyValue, ...] = ()


class SpanStatus(msgspec.Struct, **_CAMEL):
    """A ``Status``: ``code`` is :data:`STATUS_UNSET` or :data:`STATUS_ERROR` here."""

    message: str = ""
    code: int = STATUS_UNSET


class OtlpSpan(msgspec.Struct, **_CAMEL):
    """A ``Span``; ``parent_span_id`` is empty for a root span."""

    trace_id: str
    span_id: str
    name: str
    kind: int
    start_time_unix_nano: str
    end_time_unix_nano: str
    parent_span_id: str = ""
    attributes: tuple[KeyValue, ...] = ()
    events: tuple[SpanEvent, ...] = ()
    links: tuple[SpanLink, ...] = ()
    status: SpanStatus | None = None


class InstrumentationScope(msgspec.Struct, **_CAMEL):
    """Who produced the spans."""

    name: str
    version: str = ""


class ScopeSpans(msgspec.Struct, **_CAMEL):
    """The spans of one instrumentation scope."""

    scope: InstrumentationScope
    spans: tuple[OtlpSpan, ...] = ()


class OtlpResource(msgspec.Struct, **_CAMEL):
    """The entity the spans describe (``service.name`` and the like)."""

    attributes: tuple[KeyValue, ...] = ()


class ResourceSpans(msgspec.Struct, **_CAMEL):
    """The spans of one resource."""

    resource: OtlpResource
    scope_spans: tuple[ScopeSpans, ...] = ()


class ExportTraceServiceRequest(msgspec.Struct, **_CAMEL):
    """The document a collector accepts (``POST /v1/traces`` with ``application/json``)."""

    resource_spans: tuple[ResourceSpans, ...] = ()


def _value(value: AttributeValue) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bool):  # before int: a bool is an int in Python
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=str(value))
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(array_value=ArrayValue(values=tuple(AnyValue(string_value=item) for item in value)))


def attributes(values: Mapping[str, AttributeValue | None]) -> tuple[KeyValue, ...]:
    """Typed attributes in the mapping's order; ``None`` values are left out."""
    return tuple(KeyValue(key=key, value=_value(value)) for key, value in values.items() if value is not None)


def nanos(epoch_ms: int) -> str:
    """An event time (epoch milliseconds) as OTLP's unix-nanosecond decimal string."""
    return str(epoch_ms * 1_000_000)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def trace_id_of(root_session: str) -> str:
    """The 32-hex-digit trace id of the run whose root session is ``root_session``."""
    return _digest("dsh-trace", root_session)[:32]


def span_id_of(session_id: str, seq: int) -> str:
    """The 16-hex-digit id of the span opened by event ``seq`` of ``session_id`` (0: the session itself)."""
    return _digest("dsh-span", session_id, str(seq))[:16]


_encoder: Final = msgspec.json.Encoder()


def encode_request(request: ExportTraceServiceRequest) -> bytes:
    """The request as OTLP JSON, one line ending in a newline."""
    return _encoder.encode(request) + b"\n"
