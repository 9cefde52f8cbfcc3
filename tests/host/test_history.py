"""A live session keeps its recent events; older durable ones are read back from the JSONL log.

The reads every forgetting backend shares are :class:`_history_kit.HistoryReads`;
this module runs them on a JSONL log and adds what only a file has (bisection
across read chunks, a log rewritten under the session). Every read is checked
against an independent oracle: the log the store reads back and a plain list of
the events the test appended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host_spec.errors import SessionCorruptError
from host_spec.events import Event
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.session import Session
from host_spec.testing import make_events

from _history_kit import HistoryReads, filled, random_reads
from _store_kit import header


async def _filled(tmp_path: Path, count: int, kept: int, batch: int = 7) -> tuple[Session, list[Event]]:
    return await filled(JsonlStore(tmp_path), count, kept, batch)


@pytest.fixture
def open_backend(tmp_path: Path) -> Callable[[], JsonlStore]:
    return lambda: JsonlStore(tmp_path)


class TestJsonlReads(HistoryReads):
    """The reads every forgetting backend shares (:mod:`_history_kit`), on a JSONL log."""


class TestReads:
    async def test_a_backend_without_a_file_keeps_every_event(self) -> None:
        """An in-memory session (and any backend that is not a log file) forgets nothing."""
        session = Session(header(), kept_events=1)
        for index in range(20):
            session.append("a/b", {"i": index})
            await session.flush()
        assert session.held_events == 20
        session.close()
        assert len(session.closed_events()) == 20

class TestDamage:
    async def test_a_log_rewritten_under_the_session_fails_loudly(self, tmp_path: Path) -> None:
        """A forgotten event that is no longer where the log had it is SESSION_CORRUPT, never a wrong event."""
        session, _ = await _filled(tmp_path, 40, kept=2)
        session.close()
        path = JsonlStore(tmp_path).path("s-1")
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:1] + lines[2:26] + lines[27:]))  # seqs 1 and 26 gone
        with pytest.raises(SessionCorruptError, match="seq 1 is not where"):
            session.events[0]
        with pytest.raises(SessionCorruptError, match="seq 26 is missing"):
            session.events[25]
        assert session.events[30].seq == 31  # the lines that are still there still read


@settings(max_examples=25, deadline=None)
@given(
    ops=st.lists(st.tuples(st.integers(1, 9), st.booleans(), st.integers(0, 10_000)), min_size=1, max_size=25),
    kept=st.integers(1, 6),
)
def test_random_appends_flushes_and_reads_match_the_list(tmp_path_factory: Any, ops: Any, kept: int) -> None:
    """Any interleaving of appends, flushes and reads answers like the list of appended events."""
    directory = tmp_path_factory.mktemp("history")

    async def scenario() -> None:
        await random_reads(JsonlStore(directory), "h", ops, kept)

    asyncio.run(scenario())


class TestResumeBuffers:
    async def test_a_log_of_many_decode_chunks_resumes_whole(self, tmp_path: Path) -> None:
        """A log longer than the store's decode chunk (4 MiB) reads back event for event."""
        store = JsonlStore(tmp_path)
        backend = store.create(header("big"))
        events = [Event(seq=seq, time=seq, type="a/b", data=msgspec.Raw(b'{"t":"' + b"y" * 500 + b'"}'))
                  for seq in range(1, 20_001)]
        backend.append(events, expected_seq=0)
        backend.sync()
        backend.close()
        assert JsonlStore(tmp_path).path("big").stat().st_size > 2 * (4 << 20)
        _, read = JsonlStore(tmp_path).read("big")
        assert read == events

    async def test_a_forgotten_line_longer_than_a_read_chunk_reads_back(self, tmp_path: Path) -> None:
        """An event of 600 KB (longer than the 256 KiB read chunk) is read back whole."""
        store = JsonlStore(tmp_path)
        session = Session(header("long"), backend=store.create(header("long")), kept_events=1)
        appended = [session.append("a/b", {"big": "z" * 600_000})]
        for index in range(5):
            appended.append(session.append("a/b", {"i": index}))
            await session.flush()
        assert session.held_events < 6
        assert session.events[0] == appended[0] and list(session.events) == appended
        session.close()

    async def test_a_sequential_read_continues_chunk_after_chunk(self, tmp_path: Path) -> None:
        """Forgotten events spanning several read chunks iterate in order, each chunk after the last."""
        session, appended = await _filled(tmp_path, 3000, kept=4, batch=500)
        assert list(session.events) == appended
        session.close()


class TestBurst:
    """A forget as large as a resumed long log's gives the allocator's free memory back, once."""

    def test_the_allocator_can_give_memory_back_here(self) -> None:
        """The test machines run glibc: the release is a real ``malloc_trim``, not the fallback no-op."""
        from host_spec.host.store import heap

        assert heap.available()
        assert heap.release_free_memory() is None  # nothing to report: it only returns free pages

    async def test_a_resumed_long_log_forgets_in_one_burst_and_reads_the_same(self, tmp_path: Path) -> None:
        from host_spec.host.store import heap

        count = heap.BURST_EVENTS + 10
        store = JsonlStore(tmp_path)
        writer = store.create(header("s-1"))
        stored = make_events(1, count)
        writer.append(stored, expected_seq=0)
        writer.sync()
        writer.close()
        backend, events = JsonlStore(tmp_path).resume("s-1")
        session = Session(backend.header, events=events, backend=backend, durable_seq=len(events), checked=True,
                          kept_events=4)
        session.append("a/b", {"after": "resume"})
        await session.flush()
        assert session.held_events == 4  # count - 3 events forgotten in one forget, a burst's size
        assert list(session.events[:3]) == stored[:3]  # read back from the log
        assert session.events[heap.BURST_EVENTS] == stored[heap.BURST_EVENTS]
        assert session.events[-1].value() == {"after": "resume"}
        session.close()
