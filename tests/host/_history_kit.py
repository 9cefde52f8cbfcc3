"""The history reads every backend that forgets must answer alike, as one suite each backend runs.

A live session keeps its recent events and reads older durable ones back from
its log (a JSONL file, or the PostgreSQL store by seq). Whichever log it is,
every read must equal two independent oracles: the plain list of the events the
test appended (what a session that kept every event answers) and the log the
store reads back. A backend's test module subclasses :class:`HistoryReads` and
provides the ``open_backend`` fixture: a callable that opens a new handle on
the same storage (a directory, a database), closed by the fixture afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from host_spec.events import Event
from host_spec.host.store.session import Session
from host_spec.host.store.sessions import SessionStore

from _store_kit import header

__all__ = ["HistoryReads", "filled", "payload", "random_reads"]

Opener = Callable[[], Any]


def payload(index: int) -> dict[str, Any]:
    # Events of different lengths, some long, so a JSONL bisection lands mid-line.
    return {"n": index, "text": "x" * (index * 37 % 300)}


async def filled(backend: Any, count: int, kept: int, batch: int = 7, name: str = "s-1") -> tuple[Session, list[Event]]:
    """A session on ``backend`` with ``count`` events, flushed every ``batch``, keeping ``kept`` decoded."""
    session = Session(header(name), backend=backend.create(header(name)), kept_events=kept)
    appended = []
    for index in range(count):
        appended.append(session.append("a/b", payload(index)))
        if index % batch == batch - 1:
            await session.flush()
    await session.flush()
    return session, appended


async def random_reads(backend: Any, name: str, ops: Any, kept: int) -> None:
    """Appends, flushes and reads in the order ``ops`` gives (count, flush?, probe); each read equals the list's."""
    session = Session(header(name), backend=backend.create(header(name)), kept_events=kept)
    appended: list[Event] = []
    for count, flush, probe in ops:
        for _ in range(count):
            appended.append(session.append("a/b", payload(len(appended))))
        if flush:
            await session.flush()
        index = probe % len(appended)
        assert session.events[index] == appended[index]
        assert session.events[-1 - index] == appended[-1 - index]
        assert list(session.events[index : index + 5]) == appended[index : index + 5]
        assert list(session.events[::-2]) == appended[::-2]
    assert list(session.events) == appended
    await session.flush()
    session.close()


class HistoryReads:
    """Reads of a forgetting session against both oracles (see the module docstring)."""

    async def test_every_read_equals_the_list_of_appended_events(self, open_backend: Opener) -> None:
        """Indexes (negative too), slices, iteration, reversal and equality answer like the full list."""
        session, appended = await filled(open_backend(), 300, kept=5)
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

    async def test_reads_equal_what_the_store_reads_back_live_and_after_close(self, open_backend: Opener) -> None:
        """The live view, with a pending event, and after close, is the stored log; closed_events too."""
        session, _ = await filled(open_backend(), 120, kept=3)
        session.append("a/c", {"late": True})  # pending: in memory only
        assert session.events[-1].type == "a/c" and len(session.events) == 121
        await session.flush()
        session.close()
        _, stored = open_backend().read("s-1")
        assert list(session.events) == stored
        assert [session.events[i] for i in (0, 60, 5, 119, 120)] == [stored[i] for i in (0, 60, 5, 119, 120)]
        assert session.closed_events() == stored

    async def test_an_iterator_sees_events_appended_while_it_runs(self, open_backend: Opener) -> None:
        """Like a list iterator: it starts in the forgotten part and ends at the newest event."""
        session, appended = await filled(open_backend(), 60, kept=2)
        seen = []
        for event in session.events:
            seen.append(event)
            if event.seq == 59:
                appended.append(session.append("a/b", {"during": True}))
                await session.flush()  # forgets more while the iterator is suspended
        assert seen == appended
        session.close()

    async def test_own_events_skip_the_seed_and_read_back(self, open_backend: Opener) -> None:
        """The inherited prefix and the own part are both read through the history."""
        store = SessionStore(open_backend(), None)
        store.kept_events = 2
        parent = store.create("p")
        for index in range(10):
            parent.append("p/x", {"i": index})
        await parent.flush()
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
        assert tuple(child.events) == (await store.inspect("c")).events
        await store.close()

    async def test_a_resumed_log_forgets_at_its_first_flush_and_reads_the_same(self, open_backend: Opener) -> None:
        """Resume hands the whole stored list over; the next flush forgets all but the newest."""
        first, appended = await filled(open_backend(), 200, kept=4)
        first.close()
        store = SessionStore(open_backend(), None)
        store.kept_events = 4
        session = store.resume("s-1")
        assert session.held_events == 200
        appended.append(session.append("a/b", {"after": "resume"}))
        await session.flush()
        assert session.held_events == 4
        assert list(session.events) == appended
        await store.close()
