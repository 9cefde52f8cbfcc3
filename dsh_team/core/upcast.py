"""Older Team record versions, brought to the current shape before the strict decode.

A Team's log lives as long as the Team, so a record an earlier build wrote must
still fold after the payload schema changed. Every change of a record's shape
bumps :data:`~dsh_team.core.records.VERSION` and registers, per event type, one
upcaster: a pure function from a version-``N`` payload (plain JSON data) to the
version-``N+1`` payload. An older record is decoded as JSON, taken through its
chain in order, and then held to exactly the strict decode a current record gets,
so an upcast record obeys every current rule. A version without a chain to the
current one (a future version, or an event type that did not exist then) is
unsupported: the stream fails loudly (rule ``unsupported-version``) instead of
guessing what the record meant.

Version 1 is the first record shape: a task had no ``write_scopes`` and a member
no ``context`` (every teammate started fresh); message and delivery records were
as now, and ``team/mode`` did not exist yet.

The decoder is the fold's slow path: a current record never comes here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

import msgspec

from dsh_team.core.records import (
    RECORD_TYPES,
    TEAM_MEMBER,
    TEAM_MESSAGE_DELIVERED,
    TEAM_MESSAGE_QUEUED,
    TEAM_TASK,
    VERSION,
    TeamRecord,
)

__all__ = ["Payload", "Upcaster", "UPCASTERS", "UnsupportedVersion", "upcast", "decode_older"]

#: A record payload as plain JSON data.
Payload = dict[str, Any]
#: ``payload of version N -> payload of version N + 1`` (pure; never mutates its argument).
Upcaster = Callable[[Payload], Payload]


class UnsupportedVersion(Exception):
    """No upcaster chain leads from this record's version to the current one."""

    def __init__(self, version: object) -> None:
        super().__init__(f"unsupported Agent Teams event version {version}")
        self.version = version


def _filled(payload: Payload, key: str, field: str, value: Any) -> Payload:
    """``payload`` at the next version, with ``field`` defaulted to ``value`` inside ``payload[key]``.

    Anything that is not the expected object is passed on unchanged, so the strict
    decode after the chain rejects it with the usual invalid-payload failure.
    """
    inner = payload.get(key)
    if isinstance(inner, dict) and field not in inner:
        inner = {**inner, field: value}
    return {**payload, key: inner, "version": payload["version"] + 1}


def _bumped(payload: Payload) -> Payload:
    return {**payload, "version": payload["version"] + 1}


def _task_v1(payload: Payload) -> Payload:
    return _filled(payload, "task", "write_scopes", [])


def _member_v1(payload: Payload) -> Payload:
    return _filled(payload, "member", "context", "fresh")


#: ``(event type, version) -> upcaster`` to ``version + 1`` (read-only).
UPCASTERS: Final[Mapping[tuple[str, int], Upcaster]] = MappingProxyType(
    {
        (TEAM_MEMBER, 1): _member_v1,
        (TEAM_TASK, 1): _task_v1,
        (TEAM_MESSAGE_QUEUED, 1): _bumped,
        (TEAM_MESSAGE_DELIVERED, 1): _bumped,
    }
)


def upcast(event_type: str, payload: Payload, upcasters: Mapping[tuple[str, int], Upcaster] = UPCASTERS) -> Payload:
    """``payload`` taken through its chain to :data:`VERSION`.

    Raises:
        UnsupportedVersion: a step of the chain is missing (a future version included).
    """
    version = payload.get("version")
    while version != VERSION:
        step = upcasters.get((event_type, version)) if type(version) is int else None
        if step is None:
            raise UnsupportedVersion(version)
        payload = step(payload)
        version = payload["version"]
    return payload


def decode_older(event_type: str, data: bytes | msgspec.Raw) -> TeamRecord:
    """Strictly decode a Team record of an older version, after upcasting it.

    Raises:
        UnsupportedVersion: the version has no chain to the current one.
        msgspec.DecodeError: the data is no JSON object, or the upcast payload fails
            the strict decode (``ValidationError`` included).
    """
    payload = msgspec.json.decode(data)
    if not isinstance(payload, dict):
        raise msgspec.ValidationError("a Team record must be an object")
    return msgspec.convert(upcast(event_type, payload), RECORD_TYPES[event_type])
