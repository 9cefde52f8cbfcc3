"""Shared helpers for the storage tests: headers, a recording observer, backends, ``run``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from host_spec.events import Event, SessionHeader

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


class MemoryBackend:
    """A Backend seam stand-in for Session unit tests: records batches, can fail or block."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.fail: list[BaseException] = []  # raised by the next writes, in order
        self.gate: threading.Event | None = None  # when set, writes wait for it
        self.entered = threading.Event()
        self.closed = False

    def write(self, events: Sequence[Event]) -> None:
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(10), "test gate never opened"
        if self.fail:
            raise self.fail.pop(0)
        self.batches.append([event.seq for event in events])

    def close(self) -> None:
        self.closed = True

    @property
    def written(self) -> list[int]:
        return [seq for batch in self.batches for seq in batch]


async def until(predicate: Callable[[], bool], *, timeout: float = 10.0) -> None:
    """Yield to the loop until ``predicate()`` holds (threads may need to finish)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition never held"
        await asyncio.sleep(0.001)
