"""The I/O worker pool: jobs run on workers, done() always runs, idle workers go away."""

from __future__ import annotations

import threading
import time
from typing import Any

from structlog.testing import capture_logs

from kit_waits import until_sync

from host_spec.host.store.iothread import Pool


class TestPool:
    def test_results_and_errors_reach_done_on_the_worker(self) -> None:
        """done(error, result) runs on the worker thread for both outcomes."""
        pool = Pool()
        seen: list[tuple[Any, Any, bool]] = []
        main = threading.get_ident()

        def boom(_: object) -> None:
            raise OSError("disk")

        pool.submit(lambda x: x * 2, 21, lambda e, r: seen.append((e, r, threading.get_ident() != main)))
        pool.submit(boom, None, lambda e, r: seen.append((type(e), r, threading.get_ident() != main)))
        until_sync(lambda: len(seen) == 2, what="len(seen) == 2")
        assert sorted(seen, key=repr) == sorted([(None, 42, True), (OSError, None, True)], key=repr)

    def test_parallel_jobs_get_their_own_workers_up_to_the_cap(self) -> None:
        """Blocking jobs run side by side on separate threads, never more than max_workers."""
        pool = Pool(max_workers=2)
        gate, started, finished = threading.Event(), [], []

        def blocking(i: int) -> int:
            started.append(i)
            gate.wait(10)
            return i

        for i in range(3):
            pool.submit(blocking, i, lambda e, r: finished.append(r))
        until_sync(lambda: len(started) == 2, what="len(started) == 2")
        time.sleep(0.02)  # a chance for a (wrong) third worker to start: nothing to wait for when nothing happens
        assert len(started) == 2 and pool.workers == 2
        gate.set()
        until_sync(lambda: len(finished) == 3, what="len(finished) == 3")
        assert sorted(finished) == [0, 1, 2]

    def test_idle_workers_exit(self) -> None:
        """A worker with nothing to do for idle_seconds exits; the next job starts a new one."""
        pool = Pool(idle_seconds=0.01)
        done: list[Any] = []
        pool.submit(lambda _: 1, None, lambda e, r: done.append(r))
        until_sync(lambda: pool.workers == 0, what="pool.workers == 0")
        pool.submit(lambda _: 2, None, lambda e, r: done.append(r))
        until_sync(lambda: len(done) == 2, what="len(done) == 2")
        assert done == [1, 2]

    def test_a_failing_done_is_logged_and_the_worker_carries_on(self) -> None:
        """An exception in done() is logged, not fatal to the worker."""
        pool = Pool(max_workers=1)
        done: list[Any] = []

        def bad(error: object, result: object) -> None:
            raise RuntimeError("callback bug")

        with capture_logs() as logs:
            pool.submit(lambda _: None, None, bad)
            pool.submit(lambda _: "ok", None, lambda e, r: done.append(r))
            until_sync(lambda: done == ["ok"], what="the job's done callback")
        assert [e["event"] for e in logs] == ["iothread.done_failed"] and pool.workers == 1
