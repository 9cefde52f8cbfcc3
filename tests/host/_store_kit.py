"""Shared helpers for the storage tests: headers, a recording observer, an in-memory log."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from host_spec.events import Event, SessionHeader
from host_spec.testing import FaultyLog, FaultyStorage, MemoryStorage


def header(session_id: str = "s-1", **fields: Any) -> SessionHeader:
    return SessionHeader(id=session_id, created_at=fields.pop("created_at", 1_000), **fields)


class Clock:
    """A deterministic epoch-ms clock: 1000, 1001, ..."""

    def __init__(self, start: int = 1_000) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1
        return self.now


class Recorder:
    """A SessionObserver that records calls and can veto or run a hook on commit."""

    def __init__(
        self,
        *,
        veto: Callable[[Event], bool] | None = None,
        on_commit: Callable[[Any, Event], None] | None = None,
    ) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.veto = veto
        self.on_commit = on_commit

    def pre_append(self, session: Any, event: Event) -> None:
        self.calls.append(("pre", event.seq))
        if self.veto is not None and self.veto(event):
            from host_spec.errors import InvariantError

            raise InvariantError("test-plugin", f"no {event.type}")

    def committed(self, session: Any, event: Event) -> None:
        self.calls.append(("committed", event.seq))
        if self.on_commit is not None:
            self.on_commit(session, event)

    def flushed(self, session: Any, durable_seq: int) -> None:
        self.calls.append(("flushed", durable_seq))

    def kinds(self, kind: str) -> list[Any]:
        return [value for name, value in self.calls if name == kind]


def memory_log(session_header: SessionHeader | None = None) -> FaultyLog:
    """A session log for Session unit tests: in memory, recording batches, able to hold or fail writes.

    Writes go to a worker thread (``threaded``) like a slow medium's would.
    """
    log = FaultyStorage(MemoryStorage()).create(session_header or header())
    log.threaded = True
    return log

