"""Group commit behind Session.flush: batching, failures, cancellation, close, several loops."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import pytest
from _store_kit import Recorder, header, memory_log
from kit_waits import ready_work_ran, until, until_sync
from structlog.testing import capture_logs

from host_spec.errors import SessionNotLiveError
from host_spec.events import Event, encode_data
from host_spec.host.store.commit import INLINE_MAX_SECONDS
from host_spec.host.store.session import NullObserver, Session
from host_spec.testing import FaultyLog


def seeded(n: int, **fields: object) -> list[Event]:
    return [Event(i, 5, "seed/x", encode_data({"i": i})) for i in range(1, n + 1)]


class TestFlush:
    async def test_nothing_pending_means_no_write(self) -> None:
        """flush with every event durable returns at once without touching the backend."""
        backend = memory_log()
        session = Session(header(), events=seeded(2), backend=backend, durable_seq=2)
        await session.flush()
        assert backend.batches == [] and session.durable_seq == 2

    async def test_flush_writes_in_append_order(self) -> None:
        """Each flush writes exactly the events appended since the last one, in order."""
        backend, observer = memory_log(), Recorder()
        session = Session(header(), backend=backend, observer=observer)
        session.append("a/b", {})
        session.append("a/b", {})
        await session.flush()
        assert session.durable_seq == 2
        session.append("a/b", {})
        await session.flush()
        assert backend.batches == [[1, 2], [3]]
        assert observer.kinds("flushed") == [2, 3]

    async def test_seed_events_are_written_by_the_first_flush(self) -> None:
        """A fresh session with a seed writes the seed then its own events."""
        backend = memory_log()
        session = Session(header(seed_length=2), events=seeded(2), backend=backend)
        session.append("a/b", {})
        await session.flush()
        assert backend.batches == [[1, 2, 3]]

    async def test_concurrent_flushers_share_a_batch(self) -> None:
        """Sixteen tasks that append then flush together cause a single write holding all their events."""
        backend, observer = memory_log(), Recorder()
        session = Session(header(), backend=backend, observer=observer)

        async def writer(i: int) -> int:
            event = session.append("a/b", {"i": i})
            await session.flush()
            assert session.durable_seq >= event.seq
            return event.seq

        seqs = await asyncio.gather(*[writer(i) for i in range(16)])
        assert sorted(seqs) == list(range(1, 17))
        assert backend.batches == [list(range(1, 17))]
        assert observer.kinds("flushed") == [16]

    async def test_flushers_arriving_during_a_write_join_the_next_batch(self) -> None:
        """While one write runs, later flushers wait and then share exactly one more write."""
        backend = memory_log()
        backend.hold()
        session = Session(header(), backend=backend)
        session.append("a/b", {})
        first = asyncio.ensure_future(session.flush())
        await until(backend.entered.is_set, what="the write to start")
        session.append("a/b", {})
        early = asyncio.ensure_future(session.flush())  # event 2 is not in the running write
        later = []
        for _ in range(5):
            session.append("a/b", {})
            later.append(asyncio.ensure_future(session.flush()))
        await ready_work_ran()
        assert not first.done() and not early.done() and session.durable_seq == 0
        backend.release()
        await asyncio.gather(first, early, *later)
        assert backend.batches == [[1], [2, 3, 4, 5, 6, 7]]

    async def test_a_flusher_already_covered_by_the_running_write_waits_for_it(self) -> None:
        """A flush whose events are all in the running write resolves with that write, not a new one."""
        backend = memory_log()
        backend.hold()
        session = Session(header(), backend=backend)
        session.append("a/b", {})
        first = asyncio.ensure_future(session.flush())
        await until(backend.entered.is_set, what="the write to start")
        second = asyncio.ensure_future(session.flush())
        await asyncio.sleep(0)
        backend.release()
        await asyncio.gather(first, second)
        assert backend.batches == [[1]]

    async def test_failed_write_raises_to_its_waiters_and_keeps_events_pending(self) -> None:
        """Every waiter of a failed batch gets the error; durable_seq stays; the next flush retries the same events."""
        backend, observer = memory_log(), Recorder()
        backend.fail_next(OSError("disk full"))
        session = Session(header(), backend=backend, observer=observer)

        async def writer() -> None:
            session.append("a/b", {})
            await session.flush()

        with capture_logs() as logs:
            results = await asyncio.gather(writer(), writer(), writer(), return_exceptions=True)
        assert [entry["event"] for entry in logs] == ["session.flush_failed"]
        assert session.durable_seq == 0 and session.last_seq == 3
        await session.flush()
        assert [type(r) for r in results] == [OSError] * 3
        assert backend.batches == [[1, 2, 3]] and session.durable_seq == 3
        assert observer.kinds("flushed") == [3]

    async def test_the_next_batch_retries_after_a_failed_one(self) -> None:
        """Flushers queued behind a failing write succeed with the retry, which includes the failed events."""
        backend = memory_log()
        backend.hold()
        backend.fail_next(OSError("transient"))
        session = Session(header(), backend=backend)

        session.append("a/b", {})
        first = asyncio.ensure_future(session.flush())
        await until(backend.entered.is_set, what="the write to start")
        session.append("a/b", {})
        second = asyncio.ensure_future(session.flush())
        await asyncio.sleep(0)
        backend.release()
        results = await asyncio.gather(first, second, return_exceptions=True)
        assert isinstance(results[0], OSError) and results[1] is None
        assert backend.batches == [[1, 2]]

    async def test_cancelling_a_flusher_does_not_cancel_the_write(self) -> None:
        """A cancelled waiter stops waiting; the write completes and the other waiters see it."""
        backend = memory_log()
        backend.hold()
        session = Session(header(), backend=backend)
        session.append("a/b", {})
        doomed = asyncio.ensure_future(session.flush())
        survivor = asyncio.ensure_future(session.flush())
        await until(backend.entered.is_set, what="the write to start")
        doomed.cancel()
        await asyncio.sleep(0)
        assert doomed.cancelled()
        backend.release()
        await survivor
        assert backend.batches == [[1]] and session.durable_seq == 1

    @pytest.mark.parametrize("inline", [False, True], ids=["worker", "inline"])
    async def test_a_cancelled_leader_still_writes_the_batch_others_joined(self, inline: bool) -> None:
        """The flusher that formed a batch is cancelled before writing it: the batch is written anyway."""
        backend = InlineBackend().log if inline else memory_log()
        session = Session(header(), backend=backend)
        session.append("a/b", {})
        leader = asyncio.ensure_future(session.flush())
        await asyncio.sleep(0)  # the leader formed the batch and yields once before writing it
        session.append("a/b", {})
        follower = asyncio.ensure_future(session.flush())
        leader.cancel()
        await follower
        assert leader.cancelled()
        assert backend.batches == [[1, 2]] and session.durable_seq == 2

    async def test_a_lone_flusher_writes_in_its_own_step(self) -> None:
        """Serial flushes of an inline backend take one loop pass each: the write wakes no one."""
        log = memory_log()
        log.threaded = False
        threads: list[str] = []  # where each write ran (no sleep in it: a busy thread elsewhere cannot slow it)
        log.before_write(
            lambda number: threads.append("loop" if threading.current_thread() is threading.main_thread() else "worker")
        )
        session = Session(header(), backend=log)
        passes = 0

        async def count_passes() -> None:
            nonlocal passes
            while True:
                await asyncio.sleep(0)
                passes += 1

        counter = asyncio.ensure_future(count_passes())
        await asyncio.sleep(0)
        per_flush = []
        for _ in range(20):
            start = passes
            session.append("a/b", {})
            await session.flush()
            per_flush.append(passes - start)
        counter.cancel()
        assert log.written == list(range(1, 21))
        # One pass per inline flush (two before: a scheduled write, then a wake-up). A
        # write the loaded machine made slow moves the next one to a worker (and the
        # loop spins meanwhile), so only the inline ones are counted.
        inline = [count for count, thread in zip(per_flush, threads, strict=True) if thread == "loop"]
        assert inline and set(inline) == {1}

    async def test_in_memory_flush_only_reports(self) -> None:
        """Without a backend, flush marks everything durable and tells the observer once per barrier."""
        observer = Recorder()
        session = Session(header(), observer=observer)
        session.append("a/b", {})
        await session.flush()
        await session.flush()
        assert session.durable_seq == 1 and observer.kinds("flushed") == [1]

    async def test_a_failing_flushed_observer_is_contained(self) -> None:
        """An observer raising in flushed() does not fail the flush."""

        class Bad(NullObserver):
            def flushed(self, session: Session, durable_seq: int) -> None:
                raise RuntimeError("observer bug")

        session = Session(header(), backend=memory_log(), observer=Bad())
        session.append("a/b", {})
        with capture_logs() as logs:
            await session.flush()
        assert session.durable_seq == 1 and logs[0]["event"] == "session.observer_failed"


class TestClose:
    def test_close_releases_the_backend(self) -> None:
        """close() marks the session not live and closes its backend once."""
        backend = memory_log()
        session = Session(header(), backend=backend)
        assert (session.id, session.header, session.backend) == ("s-1", header(), backend)
        session.close()
        assert backend.closed and not session.live and "s-1" in repr(session)

    async def test_flush_after_close_with_pending_events_raises(self) -> None:
        """Pending events of a closed session cannot be made durable; the loss is logged at close."""
        session = Session(header(), backend=memory_log())
        session.append("a/b", {})
        with capture_logs() as logs:
            session.close()
        assert logs[0]["event"] == "session.closed_with_pending"
        with pytest.raises(SessionNotLiveError):
            await session.flush()

    async def test_in_memory_flush_after_close_with_pending_events_raises(self) -> None:
        """A closed in-memory session cannot report its unflushed events as durable."""
        session = Session(header())
        session.append("a/b", {})
        session.close()
        with pytest.raises(SessionNotLiveError):
            await session.flush()
        assert session.durable_seq == 0

    async def test_close_during_a_write_defers_the_backend_close(self) -> None:
        """The backend is closed only after the running write returned; its waiters still succeed."""
        backend = memory_log()
        backend.hold()
        session = Session(header(), backend=backend)
        session.append("a/b", {})
        first = asyncio.ensure_future(session.flush())
        await until(backend.entered.is_set, what="the write to start")
        session.append("a/b", {})
        queued = asyncio.ensure_future(session.flush())
        await asyncio.sleep(0)
        session.close()
        assert not backend.closed
        late = asyncio.ensure_future(session.flush())  # joins the queued batch, which will never run
        backend.release()
        await first
        with pytest.raises(SessionNotLiveError):
            await queued
        with pytest.raises(SessionNotLiveError):
            await late
        assert backend.closed and backend.batches == [[1]]

    async def test_close_before_a_forming_batch_is_submitted_fails_its_waiters(self) -> None:
        """A flush that had not started writing when the session closed raises SessionNotLiveError."""
        backend = memory_log()
        session = Session(header(), backend=backend)
        session.append("a/b", {})
        waiter = asyncio.ensure_future(session.flush())
        await asyncio.sleep(0)  # the waiter joined the forming batch
        session.close()
        with pytest.raises(SessionNotLiveError):
            await waiter
        assert backend.batches == [] and backend.closed

    async def test_flush_after_close_during_a_write_raises_for_uncovered_events(self) -> None:
        """Events appended after the running write began cannot be flushed once the session closed."""
        backend = memory_log()
        backend.hold()
        session = Session(header(), backend=backend)
        session.append("a/b", {})
        first = asyncio.ensure_future(session.flush())
        await until(backend.entered.is_set, what="the write to start")
        session.append("a/b", {})
        session.close()
        with pytest.raises(SessionNotLiveError):
            await session.flush()
        backend.release()
        await first
        assert backend.batches == [[1]] and backend.closed


def flusher_on_another_loop(session: Session, joined: threading.Event, outcome: list[int]) -> threading.Thread:
    """A thread whose own loop flushes ``session``, sets ``joined`` once its flush waits, then notes ``durable_seq``."""

    def run() -> None:
        async def wait() -> None:
            flush = asyncio.ensure_future(session.flush())
            await ready_work_ran()  # the flush joined the running write
            joined.set()
            await flush
            outcome.append(session.durable_seq)

        asyncio.run(wait())

    return threading.Thread(target=run)


class TestLoops:
    def test_a_write_outlives_the_loop_that_started_it(self) -> None:
        """If the flushing loop closes mid-write, the write still counts and a later loop flushes only new events."""
        backend = memory_log()
        backend.hold()
        session = Session(header(), backend=backend)
        loop = asyncio.new_event_loop()

        async def start() -> None:
            session.append("a/b", {})
            asyncio.ensure_future(session.flush())
            await until(backend.entered.is_set, what="the write to start")

        loop.run_until_complete(start())
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
        backend.release()

        async def later() -> None:
            await until(lambda: session.durable_seq == 1, what="the first write to count")
            session.append("a/b", {})
            await session.flush()

        asyncio.run(later())  # a second loop: the one that started the write is closed
        assert backend.batches == [[1], [2]]

    async def test_waiters_on_another_loop_are_woken_there(self) -> None:
        """A flusher on a second loop (another thread) that joins a running write is woken on its own loop."""
        backend = memory_log()
        backend.hold()
        session = Session(header(), backend=backend)
        joined = threading.Event()
        outcome: list[int] = []
        session.append("a/b", {})
        first = asyncio.ensure_future(session.flush())
        await until(backend.entered.is_set, what="the write to start")
        thread = flusher_on_another_loop(session, joined, outcome)
        thread.start()
        await until(joined.is_set, what="the other loop to join the write")
        backend.release()
        await first
        await asyncio.to_thread(thread.join, 10)
        assert outcome == [1] and backend.batches == [[1]]


class InlineBackend:
    """A local-file-like log: may be written on the loop thread; records where, and can be slow."""

    def __init__(self) -> None:
        self.log = memory_log()
        self.log.threaded = False  # the in-memory log allows inline writes
        self.threads: list[str] = []
        self.delay = 0.0
        self.log.before_write(self._before)

    def _before(self, number: int) -> None:
        self.threads.append("loop" if threading.current_thread() is threading.main_thread() else "worker")
        time.sleep(self.delay)


class TestInlineWrites:
    async def test_fast_writes_run_on_the_loop_thread(self) -> None:
        """An inline-capable backend is written on the loop thread: no thread hand-off per fsync."""
        backend = InlineBackend()
        session = Session(header(), backend=backend.log)
        for _ in range(3):
            session.append("a/b", {})
            await session.flush()
        assert backend.threads == ["loop", "loop", "loop"] and backend.log.written == [1, 2, 3]

    async def test_slow_writes_move_to_a_worker_and_come_back_when_fast(self) -> None:
        """Once the average write is slow the loop is not blocked; fast writes bring it back inline."""
        backend = InlineBackend()
        session = Session(header(), backend=backend.log)

        async def write_one() -> None:
            session.append("a/b", {})
            await session.flush()

        backend.delay = 4 * INLINE_MAX_SECONDS
        await write_one()  # the average was fast: inline, and now it is slow
        await write_one()  # slow average: a worker writes
        backend.delay = 0.0
        for _ in range(12):  # fast worker writes pull the average down again
            await write_one()
        assert backend.threads[:2] == ["loop", "worker"]
        assert backend.threads[-1] == "loop" and backend.log.written == list(range(1, 15))

    async def test_an_inline_write_wakes_a_waiter_of_another_loop_on_its_loop(self) -> None:
        """A flusher of another loop joins an inline write while it runs; both loops see it durable."""
        log = memory_log()
        log.threaded = False
        session = Session(header(), backend=log)
        joined = threading.Event()
        outcome: list[int] = []
        thread = flusher_on_another_loop(session, joined, outcome)

        def during_the_write(number: int) -> None:  # on the loop thread: the write is inline
            thread.start()
            assert joined.wait(10)

        log.before_write(during_the_write)
        session.append("a/b", {})
        await session.flush()
        await asyncio.to_thread(thread.join, 10)
        assert outcome == [1] and log.batches == [[1]] and session.durable_seq == 1

    async def test_inline_write_failure_reaches_the_waiter_and_keeps_events_pending(self) -> None:
        """A failed inline write raises to its flusher; the next flush retries the same events."""
        backend = InlineBackend()
        backend.log.fail_next(OSError(28, "No space left on device"))
        session = Session(header(), backend=backend.log)
        session.append("a/b", {})
        with pytest.raises(OSError):
            await session.flush()
        assert session.durable_seq == 0
        await session.flush()
        assert backend.threads == ["loop", "loop"]  # the failed write ran inline too
        assert backend.log.written == [1] and session.durable_seq == 1

    async def test_an_inline_write_that_would_wait_is_written_again_by_a_worker(self) -> None:
        """A log that refuses to wait on the loop (``BlockingIOError``) gets the same batch from a worker."""
        backend = InlineBackend()
        backend.log.fail_next(BlockingIOError(11, "the store connection is busy"))
        session = Session(header(), backend=backend.log, observer=(observer := Recorder()))
        session.append("a/b", {})
        session.append("a/b", {})
        await session.flush()  # no error reaches the flusher
        assert backend.threads == ["loop", "worker"] and backend.log.batches == [[1, 2]]
        assert session.durable_seq == 2 and observer.kinds("flushed") == [2]
        session.append("a/b", {})
        await session.flush()
        assert backend.threads[-1] == "loop" and backend.log.written == [1, 2, 3]


def slow_log() -> FaultyLog:
    """A worker-written log slow enough that the next batch always forms during a write."""
    log = memory_log()
    log.before_write(lambda number: time.sleep(0.0003))  # releases the GIL: the loop appends meanwhile
    return log


class TestBatchBoundaries:
    async def test_a_batch_never_ends_inside_a_synchronous_run_of_appends(self) -> None:
        """Appends made in one synchronous step (claim + message) are durable together or not at all."""
        backend = slow_log()
        session = Session(header(), backend=backend)

        async def keep_writing() -> None:  # keeps a write in flight, so the next batch starts after it
            for _ in range(300):
                session.append("x/pad", {})
                await session.flush()

        async def pairs() -> None:
            flushes = []
            for _ in range(1500):
                session.append("agent/inbox/spliced", {})  # the claim ...
                for _ in range(500):  # ... the work between (the worker thread runs meanwhile) ...
                    pass
                session.append("user/message", {})  # ... and the message it claims, in the same step
                flushes.append(asyncio.ensure_future(session.flush()))
                await asyncio.sleep(0)
            await asyncio.gather(*flushes)

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # let the worker thread run between any two bytecodes
        try:
            await asyncio.gather(keep_writing(), pairs())
        finally:
            sys.setswitchinterval(interval)
        types = {event.seq: event.type for event in session.events}
        assert backend.written == list(range(1, 3301))
        assert len(backend.batches) > 1
        assert [batch for batch in backend.batches if types[batch[-1]] == "agent/inbox/spliced"] == []

    def test_a_next_batch_whose_loop_closed_starts_at_once(self) -> None:
        """With its loop gone nothing appends there any more, so the batch starts from the worker."""
        backend = memory_log()
        session = Session(header(), backend=backend)
        backend.hold()
        session.append("a/b", {})
        first = threading.Thread(target=lambda: asyncio.run(session.flush()))  # another loop's flush, held
        first.start()
        assert backend.entered.wait(10)

        async def join_then_leave() -> None:
            session.append("a/b", {})
            asyncio.ensure_future(session.flush())  # joins the next batch on this loop
            await asyncio.sleep(0)  # then asyncio.run cancels the flusher and closes the loop

        asyncio.run(join_then_leave())
        backend.release()
        first.join(10)
        until_sync(lambda: session.durable_seq == 2, what="the worker to write the second batch")
        assert backend.batches == [[1], [2]] and session.durable_seq == 2
