"""The on-disk format of a JSONL session log: path segments, header line, tolerant scan.

Kept apart from the writer (:mod:`host_spec.host.store.jsonl`) because readers
(``inspect``, ``team show --at``, tests) need only this half.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec
import structlog

from host_spec.errors import SessionCorruptError, SessionError, SessionFormatError
from host_spec.events import (
    SESSION_FORMAT_VERSION,
    Event,
    SessionHeader,
    decode_event,
    decode_header,
    encode_event_lines,
    json_decode,
    json_encode,
)

__all__ = [
    "LOCK_NAME",
    "LOG_NAME",
    "TEMP_NAME",
    "Scan",
    "decode_id",
    "encode_batch",
    "encode_id",
    "header_line",
    "parse_header",
    "parse_log",
]

log = structlog.get_logger(__name__)

LOG_NAME: Final = "session.jsonl"
LOCK_NAME: Final = "session.jsonl.lock"
TEMP_NAME: Final = "session.jsonl.tmp"
_lines_decoder: Final = msgspec.json.Decoder(Event)
_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def encode_id(session_id: str) -> str:
    """A reversible single path segment: safe characters literal, every other UTF-16 unit ``~XXXX``.

    ``.`` and ``..`` (and the empty id) would not name a directory of their own, so
    they are escaped in full.
    """
    if session_id in ("", ".", ".."):
        if not session_id:
            raise SessionError("session id must be a non-empty string", code="SESSION_INVALID_ID")
        return "~002E" * len(session_id)
    parts = []
    for char in session_id:
        if char in _SAFE:
            parts.append(char)
        else:
            units = char.encode("utf-16-be", "surrogatepass")
            parts.extend(f"~{units[i]:02X}{units[i + 1]:02X}" for i in range(0, len(units), 2))
    return "".join(parts)


def decode_id(segment: str) -> str:
    """Inverse of :func:`encode_id`."""
    units = bytearray()
    index = 0
    while index < len(segment):
        char = segment[index]
        if char == "~":
            units += bytes.fromhex(segment[index + 1 : index + 5])
            index += 5
        else:
            units += char.encode("utf-16-be")
            index += 1
    return units.decode("utf-16-be", "surrogatepass")


def header_line(header: SessionHeader) -> bytes:
    """Line 1 of a log, newline included.

    ``SessionHeader`` omits default fields when encoded; on disk ``type``,
    ``version`` and ``delegation_depth`` are always written, so a reader can tell a
    header from an event and a foreign version from damage without guessing.
    """
    fields = {"type": header.type, "version": header.version, "delegation_depth": header.delegation_depth}
    fields.update((k, v) for k, v in msgspec.structs.asdict(header).items() if v is not None and k not in fields)
    return json_encode(fields) + b"\n"


def encode_batch(events: Sequence[Event]) -> bytes:
    return encode_event_lines(events)


class Scan:
    """What a full read of a log found: header, events, committed size, file size, and whether a line was torn.

    ``good_size`` ends the last complete line; bytes past it are a torn line
    (``torn``) and/or the writer's zero-filled preallocated space.
    """

    __slots__ = ("header", "events", "good_size", "size", "torn")

    def __init__(self, header: SessionHeader, events: list[Event], good_size: int, size: int, torn: bool = False) -> None:
        self.header, self.events, self.good_size, self.size = header, events, good_size, size
        self.torn = torn


def parse_header(line: bytes, path: Path) -> SessionHeader:
    try:
        raw = json_decode(line)
    except msgspec.DecodeError:
        raw = None
    # ``type`` may be absent in headers written with ``events.encode_header`` (omit_defaults).
    if not isinstance(raw, dict) or raw.get("type", "session") != "session" or "seq" in raw:
        raise SessionCorruptError(f"{path}: line 1 is not a session header", path=str(path))
    # A foreign version is refused before shape checks: the user must see "upgrade", not "corrupt".
    if raw.get("version", SESSION_FORMAT_VERSION) != SESSION_FORMAT_VERSION:
        raise SessionFormatError(
            f"{path}: session format version {raw.get('version')!r} is not supported "
            f"(this host reads version {SESSION_FORMAT_VERSION}); it was written by another harness version",
            path=str(path),
        )
    try:
        return decode_header(line)
    except msgspec.ValidationError as exc:
        raise SessionCorruptError(f"{path}: invalid session header: {exc}", path=str(path)) from exc


def parse_log(path: Path, data: bytes) -> Scan:
    """Parse a whole log; drop a torn tail; raise for damage in the committed region.

    The log ends at its first NUL byte: JSON event lines never hold one, and a
    writer's preallocated space is zero-filled (only a write that was never
    synced can lie past it). Zeros alone are not a torn line; a partial line
    before them, or one stray line after them, is (dropped with a warning).
    More than one line past a NUL is a hole in committed data: corruption, as
    an unparsable line before the last one always is.
    """
    end = data.find(b"\n")
    if end < 0:
        raise SessionCorruptError(f"{path}: missing session header", path=str(path))
    header = parse_header(data[:end], path)
    total = len(data)
    size = data.find(b"\0", end)
    if size < 0:
        size = total
    start = end + 1
    events = _decode_complete(data, start, size)
    if events:
        start = data.rindex(b"\n", start, size) + 1
    lineno = 1 + len(events)
    while start < size:
        lineno += 1
        end = data.find(b"\n", start, size)
        last = end < 0 or end + 1 == size
        if end < 0:
            reason = "no trailing newline"
        else:
            try:
                event = decode_event(data[start:end])
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                if not last:
                    raise SessionCorruptError(
                        f"{path}: unparsable committed event at line {lineno}: {exc}", path=str(path), line=lineno
                    ) from exc
                reason = f"unparsable: {exc}"
            else:
                if event.seq != len(events) + 1:
                    raise SessionCorruptError(
                        f"{path}: seq gap in committed region at line {lineno}: "
                        f"expected seq {len(events) + 1}, found {event.seq}",
                        path=str(path),
                        line=lineno,
                    )
                events.append(event)
                start = end + 1
                continue
        _torn(header, path, lineno, total - start, reason)
        return Scan(header, events, start, total, torn=True)
    if size < total and data.count(b"\0", size) != total - size:
        stray = data[size:].rstrip(b"\0")  # the file's tail only: preallocated space is one chunk
        if b"\n" in stray[:-1]:
            raise SessionCorruptError(
                f"{path}: lines after NUL bytes at line {lineno + 1}: the committed region has a hole",
                path=str(path),
                line=lineno + 1,
            )
        _torn(header, path, lineno + 1, total - size, "unparsable: NUL bytes where a line should start")
        return Scan(header, events, size, total, torn=True)
    return Scan(header, events, size, total)


#: Bytes of whole lines decoded at a time by the fast path of :func:`parse_log`.
_DECODE_CHUNK = 4 << 20


def _decode_complete(data: bytes, start: int, size: int) -> list[Event]:
    """Every complete line of ``data[start:size]`` decoded in a few C-level calls, or ``[]`` to scan line by line.

    The fast path of a clean log: ``decode_lines`` per chunk of lines instead of a
    Python step per line. Anything unusual (a bad or blank line, a seq gap) falls
    back to the line scan, which names the damage exactly.
    """
    end = data.rfind(b"\n", start, size) + 1
    if end <= start:
        return []
    events: list[Event] = []
    view, first = memoryview(data), start
    try:
        while start < end:
            # Whole lines, about _DECODE_CHUNK bytes at a time, each decoded from its own
            # copy: an event's payload is a view of the bytes it was decoded from, so a
            # kept event pins one chunk, never the whole file (a long-lived session
            # keeps only its newest events; see ``history.py``).
            stop = data.rfind(b"\n", start, min(start + _DECODE_CHUNK, end)) + 1 or end
            events += _lines_decoder.decode_lines(bytes(view[start:stop]))
            start = stop
    except (msgspec.DecodeError, msgspec.ValidationError):
        return []
    if len(events) != data.count(b"\n", first, end):  # blank lines are skipped by decode_lines
        return []
    seq = 0
    for event in events:
        seq += 1
        if event.seq != seq:
            return []
    return events


def _torn(header: SessionHeader, path: Path, line: int, dropped: int, reason: str) -> None:
    log.warning("session.torn_tail", session=header.id, path=str(path), line=line, dropped_bytes=dropped, reason=reason)


