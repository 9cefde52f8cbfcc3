"""Crash safety with real processes: SIGKILL never loses a flushed event nor leaves an unreadable log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from host_spec.host.store.sessions import SessionStore
from host_spec.host.store.jsonl import JsonlStore

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from host_spec.host.store.sessions import SessionStore
    from host_spec.host.store.jsonl import JsonlStore

    root, mode, stop_flushing_at = sys.argv[1], sys.argv[2], int(sys.argv[3])

    async def main():
        store = SessionStore(JsonlStore(root), None)
        session = store.create("crash") if mode == "create" else store.resume("crash")
        while True:
            n = session.last_seq + 1
            session.append("crash/tick", {"n": n, "pad": "x" * 200})
            if n > stop_flushing_at:  # keep appending, never flush again
                if n == stop_flushing_at + 5:
                    print("appending unflushed", flush=True)
                time.sleep(0.0005)
                continue
            await session.flush()
            print(n, flush=True)

    asyncio.run(main())
    """
)


class Child:
    """A writer subprocess; ``last`` is the newest count it printed (each printed count was flushed)."""

    def __init__(self, root: Path, mode: str, stop_flushing_at: int = 10**9) -> None:
        self.last = 0
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(root), mode, str(stop_flushing_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def read_until(self, target: int) -> int:
        """Read printed counts until one reaches ``target``."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 60
        while self.last < target:
            assert time.monotonic() < deadline, "child too slow"
            line = self.proc.stdout.readline()
            assert line, f"child exited early: {self.proc.stderr.read() if self.proc.stderr else ''}"
            if line.strip().isdigit():  # structlog may print warnings (torn tail repaired) too
                self.last = int(line)
        return self.last

    def read_marker(self, marker: str) -> None:
        """Read lines until the child prints ``marker`` (counts read on the way are kept)."""
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, f"child exited early: {self.proc.stderr.read() if self.proc.stderr else ''}"
            if line.strip() == marker:
                return
            if line.strip().isdigit():
                self.last = int(line)

    def kill(self) -> int:
        """SIGKILL the child; return the last count it printed before dying."""
        os.kill(self.proc.pid, signal.SIGKILL)
        assert self.proc.wait(timeout=30) == -signal.SIGKILL
        assert self.proc.stdout is not None and self.proc.stderr is not None
        rest = [line for line in self.proc.stdout.read().split("\n") if line.strip().isdigit()]  # + readline buffer
        self.proc.stdout.close()
        self.proc.stderr.close()
        if rest:
            self.last = int(rest[-1])
        return self.last


def ticks(root: Path) -> list[int]:
    _, events = JsonlStore(root).read("crash")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return [e.value()["n"] for e in events]


class TestSigkill:
    def test_exactly_the_flushed_events_survive(self, tmp_path: Path) -> None:
        """Killed while appending unflushed events after N flushes, the log holds exactly those N events."""
        child = Child(tmp_path, "create", stop_flushing_at=25)
        try:
            assert child.read_until(25) == 25
            child.read_marker("appending unflushed")  # events 26.. exist in memory only
        finally:
            last = child.kill()
        assert last == 25
        assert ticks(tmp_path) == list(range(1, 26))

    def test_kill_mid_flush_then_resume_and_kill_again(self, tmp_path: Path) -> None:
        """Killed at a random point of append+flush, every printed (flushed) event survives, at most one more does,
        and a resumed writer continues the same log after repairing it."""
        child = Child(tmp_path, "create")
        try:
            child.read_until(30)
        finally:
            first = child.kill()
        survived = ticks(tmp_path)
        assert len(survived) in (first, first + 1) and survived == list(range(1, len(survived) + 1))

        child = Child(tmp_path, "resume")
        try:
            child.read_until(len(survived) + 30)
        finally:
            second = child.kill()
        survived = ticks(tmp_path)
        assert len(survived) in (second, second + 1) and survived == list(range(1, len(survived) + 1))

    async def test_a_killed_writer_releases_its_lock(self, tmp_path: Path) -> None:
        """The flock dies with the process: the session can be resumed right after a SIGKILL."""
        child = Child(tmp_path, "create")
        try:
            child.read_until(3)
        finally:
            child.kill()
        store = SessionStore(JsonlStore(tmp_path), None)
        session = store.resume("crash")
        n = session.append("crash/tick", {"n": session.last_seq + 1, "pad": ""}).seq
        await store.dispose(session)
        assert ticks(tmp_path)[-1] == n
