"""Baselines measured in the same run as ours: the raw disk limits and a SQLite peer.

A user choosing a peer system gets SQLite (crew, LangGraph checkpointers): a task
row with a ``revision`` updated by compare-and-set plus an append-only event row,
one commit per mutation, in WAL mode with ``synchronous=FULL`` (every commit is
synced). :class:`SqliteBoard` is that design with the stdlib ``sqlite3``, one
connection per writer. :class:`RawAppend` and :class:`RawPreallocated` are the
disk's own limits for one durable record: ``write`` + ``fsync`` at the end of a
growing file, and ``pwrite`` + ``fdatasync`` into already written space (what a
preallocated log, SQLite's WAL included, pays).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

__all__ = ["RawAppend", "RawPreallocated", "SqliteBoard"]

_fdatasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


class RawAppend:
    """``write`` + ``fsync`` of one line at the end of an ``O_APPEND`` file."""

    def __init__(self, path: Path, line: bytes) -> None:
        self.line = line
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def step(self) -> int:
        os.write(self.fd, self.line)
        os.fsync(self.fd)
        return 1

    def close(self) -> None:
        os.close(self.fd)


class RawPreallocated:
    """``pwrite`` + ``fdatasync`` of one line into a file whose blocks were written (zeros) and synced."""

    def __init__(self, path: Path, line: bytes, *, size: int = 32 << 20) -> None:
        self.line = line
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self.size = size
        chunk = bytes(1 << 20)
        for offset in range(0, size, len(chunk)):
            os.pwrite(self.fd, chunk, offset)
        os.fsync(self.fd)
        self.offset = 0

    def step(self) -> int:
        if self.offset + len(self.line) > self.size:
            self.offset = 0  # wrap: the space stays written, as in a reused WAL
        os.pwrite(self.fd, self.line, self.offset)
        _fdatasync(self.fd)
        self.offset += len(self.line)
        return 1

    def close(self) -> None:
        os.close(self.fd)


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, revision INTEGER NOT NULL,"
    " subject TEXT NOT NULL, data TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS task_events (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " task_id TEXT NOT NULL, revision INTEGER NOT NULL, data TEXT NOT NULL)",
)


class SqliteBoard:
    """A crew-style task board: CAS ``UPDATE ... WHERE revision = ?`` plus an event row per commit.

    Args:
        path: The database file.
        writers: How many connections (one per writer thread); each writer owns one task.
        data: The event payload stored per mutation (the same JSON line our log writes).
    """

    def __init__(self, path: Path, writers: int, data: str) -> None:
        self.data = data
        self.connections = [self._connect(path) for _ in range(writers)]
        first = self.connections[0]
        for statement in _SCHEMA:
            first.execute(statement)
        for index in range(writers):
            first.execute("INSERT OR REPLACE INTO tasks VALUES (?, 1, 'bench task', ?)", (f"task-{index}", data))
        self.revisions = [1] * writers

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        return connection

    def update(self, index: int) -> None:
        """One durable CAS edit of writer ``index``'s task (raises if the revision moved)."""
        connection, task_id, revision = self.connections[index], f"task-{index}", self.revisions[index]
        connection.execute("BEGIN IMMEDIATE")
        try:
            changed = connection.execute(
                "UPDATE tasks SET revision = ?, subject = ?, data = ? WHERE id = ? AND revision = ?",
                (revision + 1, ("bench task", "bench task, edited")[revision % 2], self.data, task_id, revision),
            ).rowcount
            if changed != 1:
                raise RuntimeError(f"{task_id}: stale revision {revision}")
            connection.execute(
                "INSERT INTO task_events (task_id, revision, data) VALUES (?, ?, ?)", (task_id, revision + 1, self.data)
            )
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        self.revisions[index] = revision + 1

    def serial(self) -> int:
        self.update(0)
        return 1

    def concurrent(self, seconds: float) -> tuple[int, float]:
        """Every writer in its own thread, updating for ``seconds``; ``(ops, elapsed)``."""
        counts = [0] * len(self.connections)
        start = time.perf_counter()
        end = start + seconds

        def writer(index: int) -> None:
            while time.perf_counter() < end:
                self.update(index)
                counts[index] += 1

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(len(self.connections))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return sum(counts), time.perf_counter() - start

    def close(self) -> None:
        for connection in self.connections:
            connection.close()
