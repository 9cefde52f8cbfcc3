"""wait_for_change (§8) with the ``since`` cursor, against a real host with JSONL persistence."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_team.log.waits import WaitResult
from dsh_team.errors import TeamError
from dsh_team.service import TeamService
from host_spec.records import AbortSignal, CancelCause

from kit_waits import ready_work_ran, until
from team_host import faulty_log, hold_open, lead, open_host, service, team

TEN_S = 10_000


async def started(teams: TeamService, coro: Any, team_id: str = "lead") -> asyncio.Task[Any]:
    """Start a wait and return once it is registered on the Team (or already answered)."""
    before = teams.activity.waiting(team_id)
    task = asyncio.ensure_future(coro)
    await until(lambda: teams.activity.waiting(team_id) > before or task.done(), what="the wait to be registered")
    return task


class TestArguments:
    @pytest.mark.parametrize("timeout", [9_999, 3_600_001, 10_000.0, "10000", True, None])
    async def test_timeout_must_be_an_integer_from_10s_to_1h(self, tmp_path: Path, timeout: Any) -> None:
        """Out-of-range or non-integer timeouts are TEAM_INVALID_TIMEOUT."""
        host = await open_host(tmp_path)
        root = await lead(host)
        with pytest.raises(TeamError, match="timeout_ms must be an integer from 10000 through 3600000") as caught:
            await service(host).wait_for_change(root, timeout)
        assert caught.value.code == "TEAM_INVALID_TIMEOUT"
        await host.close()

    @pytest.mark.parametrize("since", [-1, 1.5, "3", 2**53])
    async def test_since_must_be_a_log_position(self, tmp_path: Path, since: Any) -> None:
        """A bad cursor is TEAM_INVALID_ARGUMENT."""
        host = await open_host(tmp_path)
        root = await lead(host)
        with pytest.raises(TeamError) as caught:
            await service(host).wait_for_change(root, TEN_S, since=since)
        assert caught.value.code == "TEAM_INVALID_ARGUMENT"
        await host.close()

    async def test_non_members_cannot_wait(self, tmp_path: Path) -> None:
        """A stale caller is TEAM_NOT_MEMBER before anything else."""
        host = await open_host(tmp_path)
        with pytest.raises(TeamError) as caught:
            await service(host).wait_for_change(object(), 1)
        assert caught.value.code == "TEAM_NOT_MEMBER"
        await host.close()


class TestWaking:
    async def test_a_change_wakes_waiters_only_after_its_flush(self, tmp_path: Path) -> None:
        """A teammate's wait ends when the Lead's task append is durable, not before (case 36)."""
        host = await open_host(tmp_path)
        root, (alpha,) = await team(host, "alpha")
        teams = service(host)
        await hold_open(host, root)
        gate = faulty_log(root.session)
        waiting = await started(teams, teams.wait_for_change(alpha, TEN_S))
        gate.hold()
        creating = asyncio.ensure_future(teams.create_task(root, subject="s", description="d"))
        await gate.wait_entered()
        await ready_work_ran()
        assert not waiting.done() and not creating.done()
        assert teams.get_task(alpha, "task-1").revision == 1  # visible, not yet durable
        gate.release()
        result = await waiting
        assert (result.timed_out, result.position) == (False, root.session.last_seq)
        assert result.delta is not None and [t.id for t in result.delta.tasks] == ["task-1"]
        await creating
        await host.close()

    async def test_since_returns_at_once_after_a_later_change(self, tmp_path: Path) -> None:
        """Reading position then waiting with since=position never misses a change."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        await hold_open(host, root)
        await teams.create_task(root, subject="s", description="d")
        first = teams.journals.get(root.session).position
        assert first > 0
        await teams.create_task(root, subject="t", description="d")
        quick = await teams.wait_for_change(root, TEN_S, since=first)
        assert quick.timed_out is False and quick.position > first
        pending = await started(teams, teams.wait_for_change(root, TEN_S, since=quick.position))
        assert not pending.done()
        await teams.update_task(root, task_id="task-1", expected_revision=1, action="claim")
        assert (await pending).position > quick.position
        await host.close()

    async def test_changes_before_the_wait_are_not_replayed(self, tmp_path: Path) -> None:
        """Edge-triggered: an earlier change does not end a later wait; the timeout does."""
        host = await open_host(tmp_path)
        root = await lead(host)
        await hold_open(host, root)
        loop = asyncio.get_running_loop()
        fast = TeamService(host, timer=lambda delay, fn: loop.call_later(delay / 1000, fn).cancel)
        fast.session_created(root.session)
        await fast.create_task(root, subject="s", description="d")
        result = await fast.wait_for_change(root, TEN_S)
        assert result == WaitResult(timed_out=True, position=fast.journals.get(root.session).position)
        await host.close()

    async def test_a_member_going_idle_wakes_nobody_unless_the_team_is_quiet(self, tmp_path: Path) -> None:
        """No idle ping: a status edge alone ends no wait; when it leaves the Team quiet, the record does."""
        host = await open_host(tmp_path)
        root, (alpha,) = await team(host, "alpha")
        teams = service(host)
        await hold_open(host, root)
        waiting = await started(teams, teams.wait_for_change(root, TEN_S))
        teams.agent_status(object(), "idle")
        teams.agent_status(alpha, "idle")
        teams.agent_status(alpha, "running")
        await ready_work_ran()
        assert not waiting.done()  # the held member keeps the Team busy: nothing to report
        await teams.dispose()
        ended = await waiting
        assert (ended.timed_out, ended.position, ended.reason) == (False, teams.journals.get(root.session).position, None)
        await host.close()

    async def test_a_lone_waiter_gets_one_quiescence_record(self, tmp_path: Path) -> None:
        """A wait in a Team where nobody else can act ends on one quiescence record, reused while nothing changes."""
        host = await open_host(tmp_path)
        root, (alpha,) = await team(host, "alpha")
        teams = service(host)
        await teams.create_task(root, subject="s", description="d")
        first = await teams.wait_for_change(alpha, TEN_S)
        assert first.reason == "quiescent" and first.stalled is not None and first.stalled.ready == ("task-1",)
        assert first.position == root.session.last_seq and root.session.events[-1].type == "team/quiescent"
        for again in (await teams.wait_for_change(root, TEN_S), await teams.wait_for_change(alpha, TEN_S, since=0)):
            # still quiet: at once, no second record
            assert (again.position, again.reason, again.stalled) == (first.position, first.reason, first.stalled)
        await host.close()


class TestAbort:
    async def test_pre_aborted_signals(self, tmp_path: Path) -> None:
        """An exception reason is raised as is; other reasons become TEAM_WAIT_ABORTED."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        boom = RuntimeError("boom")
        signal = AbortSignal()
        signal.abort(boom)
        with pytest.raises(RuntimeError) as caught:
            await teams.wait_for_change(root, TEN_S, signal=signal)
        assert caught.value is boom
        textual = AbortSignal()
        textual.abort("string cancellation")
        with pytest.raises(TeamError, match="^wait_agent aborted: string cancellation$") as aborted:
            await teams.wait_for_change(root, TEN_S, signal=textual)
        assert aborted.value.code == "TEAM_WAIT_ABORTED"
        await host.close()

    async def test_one_abort_leaves_other_waiters_waiting(self, tmp_path: Path) -> None:
        """Aborting one wait (structured reason) ends only that wait."""
        host = await open_host(tmp_path)
        root, (alpha,) = await team(host, "alpha")
        teams = service(host)
        await hold_open(host, root)
        signal = AbortSignal()
        aborted = await started(teams, teams.wait_for_change(root, TEN_S, signal=signal))
        survivor = await started(teams, teams.wait_for_change(alpha, TEN_S))
        assert teams.activity.waiting("lead") == 2
        signal.abort(CancelCause("user"))
        with pytest.raises(TeamError, match=r"wait_agent aborted: CancelCause\(kind='user'"):
            await aborted
        assert not survivor.done() and teams.activity.waiting("lead") == 1
        await teams.create_task(alpha, subject="s", description="d")
        assert (await survivor).timed_out is False
        assert teams.activity.waiting("lead") == 0
        await host.close()


class TestClose:
    async def test_disposal_releases_waits_and_later_waits_return_at_once(self, tmp_path: Path) -> None:
        """Closing the service ends waits with timed_out False, now and later."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        waiting = await started(teams, teams.wait_for_change(root, TEN_S))
        await teams.dispose()
        assert (await waiting).timed_out is False
        assert (await teams.wait_for_change(root, TEN_S)).timed_out is False
        await host.close()
