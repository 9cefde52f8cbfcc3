"""Admission cutoff and bounded settlement, alone and through the service."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsh_team.errors import TeamCode, TeamError
from dsh_team.log.lifecycle import Lifecycle, disposed_error

from kit_waits import until
from team_host import faulty_log, lead, open_host, service


class TestLifecycle:
    async def test_admission_closes_once(self) -> None:
        """After close, admit and track refuse with TEAM_DISPOSED (the work never starts)."""
        life = Lifecycle(100)
        life.admit()
        assert not life.disposed
        life.close()
        life.close()
        assert life.disposed and life.signal.reason.code == "TEAM_DISPOSED"
        with pytest.raises(TeamError, match="Agent Teams service disposed"):
            life.admit()
        started = []

        async def work() -> None:
            started.append(True)

        with pytest.raises(TeamError):
            life.track(work())
        with pytest.raises(TeamError):
            life.track(_Awaitable())
        await asyncio.sleep(0)
        assert started == []

    def test_cancellation_is_recognised_through_cause_chains(self) -> None:
        """The abort reason, any TEAM_DISPOSED in the chain and CancelledError are not failures."""
        life = Lifecycle(100)
        life.close()
        wrapped = RuntimeError("wrapper")
        wrapped.__cause__ = life.signal.reason
        coded = ValueError("outer")
        coded.__cause__ = disposed_error("teammate creation aborted")
        during_handling = RuntimeError("cleanup failed while handling a cancellation")
        during_handling.__context__ = disposed_error("teammate creation aborted")
        cyclic = RuntimeError("cycle")
        other = RuntimeError("other")
        cyclic.__cause__, other.__cause__ = other, cyclic
        assert life.is_cancellation(life.signal.reason)
        assert life.is_cancellation(wrapped) and life.is_cancellation(coded)
        assert life.is_cancellation(asyncio.CancelledError())
        assert not life.is_cancellation(cyclic)
        assert not life.is_cancellation(during_handling)  # implicit context: a real failure
        assert not life.is_cancellation(TeamError("x", TeamCode.TASK_BLOCKED))

    async def test_settle_reports_failures_and_bounds_the_wait(self) -> None:
        """Real failures and a timeout are reported; cancellations are not; slow work keeps running."""
        life = Lifecycle(30)
        assert await life.settle() == []
        release = asyncio.Event()

        async def fail() -> None:
            raise RuntimeError("broken")

        async def cancelled() -> None:
            raise disposed_error()

        async def slow() -> str:
            await release.wait()
            return "done"

        failing, quiet, stuck = life.track(fail()), life.track(cancelled()), life.track(slow())
        assert life.in_flight == 3
        failures = await life.settle()
        assert [type(f) for f in failures] == [RuntimeError, TeamError]
        assert failures[1].code == "TEAM_DISPOSAL_TIMEOUT"
        assert not stuck.done()
        release.set()
        assert await stuck == "done" and failing.done() and quiet.done()
        assert life.in_flight == 0
        assert await life.settle([stuck]) == []

    async def test_operations_are_tracked_in_the_callers_task(self) -> None:
        """operation() admits, tracks until exit, and hands its failure to settle."""
        life = Lifecycle(1_000)

        async def op(fail: bool) -> None:
            with life.operation():
                await asyncio.sleep(0.001)
                if fail:
                    raise RuntimeError("op failed")

        tasks = [asyncio.ensure_future(op(True)), asyncio.ensure_future(op(False))]
        await asyncio.sleep(0)
        assert life.in_flight == 2
        failures = await life.settle()
        assert [str(f) for f in failures] == ["op failed"]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(results[0], RuntimeError) and results[1] is None
        life.close()
        with pytest.raises(TeamError):
            await op(False)

    async def test_a_block_outliving_two_settlements_is_watched_by_both(self) -> None:
        """Every bounded settlement of a still-running block times out on the same marker; once it ended, nothing is pending."""
        life = Lifecycle(20)
        release = asyncio.Event()

        async def op() -> None:
            with life.operation():
                await release.wait()
                raise RuntimeError("late failure")

        task = asyncio.ensure_future(op())
        await asyncio.sleep(0)
        for _ in range(2):
            failures = await life.settle()
            assert [f.code for f in failures] == ["TEAM_DISPOSAL_TIMEOUT"]  # type: ignore[attr-defined]
        assert life.in_flight == 1
        release.set()
        with pytest.raises(RuntimeError):
            await task
        assert life.in_flight == 0 and await life.settle() == []

    async def test_with_timeout(self) -> None:
        """Work inside the bound returns its value; slower work is TEAM_DISPOSAL_TIMEOUT."""
        life = Lifecycle(20)
        assert await life.with_timeout(asyncio.sleep(0, "ok"), "drain") == "ok"
        with pytest.raises(TeamError, match="Agent Teams drain exceeded 20ms") as caught:
            await life.with_timeout(asyncio.sleep(1), "drain")
        assert caught.value.code == "TEAM_DISPOSAL_TIMEOUT"


class _Awaitable:
    """An awaitable without ``close`` (track must refuse it without starting it)."""

    def __await__(self):  # type: ignore[no-untyped-def]
        yield from ()


class TestServiceDisposal:
    async def test_mutations_after_disposal_are_refused(self, tmp_path: Path) -> None:
        """Both before and inside the serialized section, disposal refuses new mutations."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        journal = teams.journals.get(root.session)
        await host.quiesce()  # start-up recovery is scheduled host work: it has run
        await until(lambda: teams.lifecycle.in_flight == 0, what="start-up work (recovery) to settle")
        async with journal.lock:  # the mutation is admitted, then queues for the section
            before = teams.lifecycle.in_flight
            queued = asyncio.ensure_future(teams.create_task(root, subject="s", description="d"))
            await asyncio.sleep(0)
            assert teams.lifecycle.in_flight == before + 1
            teams.lifecycle.close()
        with pytest.raises(TeamError) as inside:
            await queued
        assert inside.value.code == "TEAM_DISPOSED"
        with pytest.raises(TeamError) as before:
            await teams.create_task(root, subject="s", description="d")
        assert before.value.code == "TEAM_DISPOSED"
        assert root.session.last_seq == 0
        assert [v.id for v in teams.list_tasks(root)] == []  # reads still work
        await host.close()

    async def test_disposal_is_bounded_by_a_stuck_flush(self, tmp_path: Path) -> None:
        """An admitted mutation stuck in its flush makes disposal report TEAM_DISPOSAL_TIMEOUT."""
        host = await open_host(tmp_path, {"disposal_timeout_ms": 30})
        root = await lead(host)
        teams = service(host)
        gate = faulty_log(root.session)
        gate.hold()
        stuck = asyncio.ensure_future(teams.create_task(root, subject="s", description="d"))
        await gate.wait_entered()
        with pytest.raises(BaseExceptionGroup, match="Agent Teams runtime disposal failed") as caught:
            await teams.dispose()
        assert [e.code for e in caught.value.exceptions] == ["TEAM_DISPOSAL_TIMEOUT"]
        gate.release()
        assert (await stuck).id == "task-1"  # admitted work still finishes
        await host.close()
