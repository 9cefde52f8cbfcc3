"""A live session keeps its recent events; older durable ones are read back from the JSONL log.

Every read is checked against an independent oracle: the log the store reads
back (``JsonlStore.read``) and a plain list of the events the test appended, the
answers a session that kept every event gives.
"""

from __future__ import annotations

import asyncio
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
from host_spec.host.store.sessions import SessionStore
from host_spec.testing import make_events

from _store_kit import header


def _payload(index: int) -> dict[str, Any]:
    # Lines of different lengths, some long, so bisection lands mid-line.
    return {"n": index, "text": "x" * (index * 37 % 300)}


async def _filled(tmp_path: Path, count: int, kept: int, batch: int = 7) -> tuple[Session, list[Event]]:
    store = JsonlStore(tmp_path)
    session = Session(header("s-1"), backend=store.create(header("s-1")), kept_events=kept)
    appended = []
    for index in range(count):
        appended.append(session.append("a/b", _payload(index)))
        if index % batch == batch - 1:
            await session.flush()
    await session.flush()
    return session, appended


class TestReads:
    async def test_every_read_equals_the_list_of_appended_events(self, tmp_path: Path) -> None:
        """Indexes (negative too), slices, iteration and equality answer like the full list."""
        session, appended = await _filled(tmp_path, 300, kept=5)
        events = session.events
        assert session.held_events < 2 * 5 + 7 + 1  # the rest was forgotten
        assert len(events) == 300
        assert list(events) == appended
        assert [events[i] for i in range(300)] == appended
        assert [events[i] for i in range(-1, -301, -1)] == appended[::-1]
        assert list(events[17:203]) == appended[17:203]
        assert list(events[::-3]) == appended[::-3]
        assert list(events[250:10]) == []
        assert events == appended
        assert list(reversed(events)) == appended[::-1]
        with pytest.raises(IndexError):
            events[300]
        with pytest.raises(IndexError):
            events[-301]
        session.close()

    async def test_reads_equal_what_the_store_reads_back(self, tmp_path: Path) -> None:
        """The live view, after more appends, and after close, is the stored log."""
        session, _ = await _filled(tmp_path, 120, kept=3)
        session.append("a/c", {"late": True})  # pending: in memory only
        assert session.events[-1].type == "a/c" and len(session.events) == 121
        await session.flush()
        session.close()
        _, stored = JsonlStore(tmp_path).read("s-1")
        assert list(session.events) == stored
        assert [session.events[i] for i in (0, 60, 5, 119, 120)] == [stored[i] for i in (0, 60, 5, 119, 120)]

    async def test_an_iterator_sees_events_appended_while_it_runs(self, tmp_path: Path) -> None:
        """Like a list iterator: it starts in the forgotten part and ends at the newest event."""
        session, appended = await _filled(tmp_path, 60, kept=2)
        seen = []
        for event in session.events:
            seen.append(event)
            if event.seq == 59:
                appended.append(session.append("a/b", {"during": True}))
                await session.flush()  # forgets more while the iterator is suspended
        assert seen == appended
        session.close()

    async def test_own_events_skip_the_seed_and_read_back(self, tmp_path: Path) -> None:
        """The inherited prefix and the own part are both read through the history."""
        store = SessionStore(JsonlStore(tmp_path), None)
        store.kept_events = 2
        parent = store.create("p")
        for index in range(10):
            parent.append("p/x", {"i": index})
        child = store.create("c", seed=tuple(parent.events), parent_session="p")
        for index in range(40):
            child.append("c/x", {"i": index})
            await child.flush()
        own = child.own_events()
        assert child.held_events <= 2 * 2 + 1
        assert [e.type for e in own] == ["c/x"] * 40
        assert [own[i].seq for i in (0, -1, 20)] == [11, 50, 31]
        assert [e.seq for e in own[5:8]] == [16, 17, 18]
        assert [e.type for e in child.events[:10]] == ["p/x"] * 10
        await store.close()

    async def test_a_resumed_log_forgets_at_its_first_flush_and_reads_the_same(self, tmp_path: Path) -> None:
        """Resume hands the whole stored list over; the next flush forgets all but the newest."""
        first, appended = await _filled(tmp_path, 200, kept=4)
        first.close()
        backend, events = JsonlStore(tmp_path).resume("s-1")
        session = Session(backend.header, events=events, backend=backend, durable_seq=len(events), checked=True,
                          kept_events=4)
        assert session.held_events == 200
        appended.append(session.append("a/b", {"after": "resume"}))
        await session.flush()
        assert session.held_events == 4
        assert list(session.events) == appended
        session.close()

    async def test_a_backend_without_a_file_keeps_every_event(self) -> None:
        """An in-memory session (and any backend that is not a log file) forgets nothing."""
        session = Session(header(), kept_events=1)
        for index in range(20):
            session.append("a/b", {"i": index})
            await session.flush()
        assert session.held_events == 20
        session.close()
        assert len(session.closed_events()) == 20

    async def test_closed_events_of_a_forgetting_session_are_the_whole_log(self, tmp_path: Path) -> None:
        session, appended = await _filled(tmp_path, 50, kept=2)
        session.close()
        assert session.closed_events() == appended


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
        store = JsonlStore(directory)
        session = Session(header("h"), backend=store.create(header("h")), kept_events=kept)
        appended: list[Event] = []
        for count, flush, probe in ops:
            for _ in range(count):
                appended.append(session.append("a/b", _payload(len(appended))))
            if flush:
                await session.flush()
            index = probe % len(appended)
            assert session.events[index] == appended[index]
            assert session.events[-1 - index] == appended[-1 - index]
            assert list(session.events[index : index + 5]) == appended[index : index + 5]
        assert list(session.events) == appended
        await session.flush()
        session.close()

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
