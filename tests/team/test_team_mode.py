"""Team mode (seed 003): root selection recorded as team/mode, inherited by descendants."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from dsh_team.errors import TeamError

from kit_waits import ready_work_ran, until
from team_host import faulty_log, child, hold_open, lead, open_host, service, team


def mode_records(agent: Any) -> list[bool]:
    return [e.value()["enabled"] for e in agent.session.events if e.type == "team/mode"]


class TestSelection:
    async def test_default_is_configurable(self, tmp_path: Path) -> None:
        """Without a record, the configured default decides; Team records imply on."""
        host = await open_host(tmp_path, {"team_mode_default": False})
        root, (alpha,) = await team(host, "alpha")
        teams = service(host)
        assert teams.is_enabled(root) is True  # the roster records imply an enabled Team
        fresh = await lead(host, "fresh")
        assert teams.is_enabled(fresh) is False
        with pytest.raises(TeamError) as caught:
            await teams.create_task(fresh, subject="s", description="d")
        assert caught.value.code == "TEAM_MODE_DISABLED"
        assert fresh.session.last_seq == 0
        await teams.set_enabled(fresh, True)
        assert (await teams.create_task(fresh, subject="s", description="d")).id == "task-1"
        await host.close()

    async def test_descendants_share_the_roots_selection(self, tmp_path: Path) -> None:
        """Teammates and ordinary forks read the root's mode; only the root may set it."""
        host = await open_host(tmp_path)
        root, (alpha,) = await team(host, "alpha")
        fork = await child(host, root, "fork")
        grandchild = await child(host, fork, "grandchild")
        teams = service(host)
        assert all(teams.is_enabled(a) for a in (root, alpha, fork, grandchild))
        await teams.set_enabled(root, False)
        assert not any(teams.is_enabled(a) for a in (root, alpha, fork, grandchild))
        assert teams.is_enabled(copy.copy(root)) is False
        for agent in (alpha, fork):
            with pytest.raises(TeamError, match="only the root session can change Team mode") as caught:
                await teams.set_enabled(agent, True)
            assert caught.value.code == "TEAM_LEAD_REQUIRED"
        with pytest.raises(TeamError) as stale:
            await teams.set_enabled(copy.copy(root), True)
        assert stale.value.code == "TEAM_NOT_MEMBER"
        with pytest.raises(TeamError) as bad:
            await teams.set_enabled(root, 1)
        assert bad.value.code == "TEAM_INVALID_ARGUMENT"
        with pytest.raises(TeamError) as off:
            await teams.update_task(alpha, task_id="task-1", expected_revision=1, action="claim")
        assert off.value.code == "TEAM_MODE_DISABLED"
        await host.close()

    async def test_same_selection_is_not_recorded_twice(self, tmp_path: Path) -> None:
        """Repeating the current selection appends nothing."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        await teams.set_enabled(root, True)
        await teams.set_enabled(root, True)
        await teams.set_enabled(root, False)
        assert mode_records(root) == [True, False]
        await host.close()

    async def test_failed_flush_keeps_the_selection_and_retry_only_flushes(self, tmp_path: Path) -> None:
        """The appended selection is in force despite the failed flush; a retry adds no event."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        gate = faulty_log(root.session)
        gate.fail_next()
        with pytest.raises(TeamError) as caught:
            await teams.set_enabled(root, False)
        assert caught.value.code == "TEAM_PERSISTENCE_UNCONFIRMED"
        assert teams.is_enabled(root) is False
        await teams.set_enabled(root, False)
        assert mode_records(root) == [False]
        assert root.session.durable_seq == root.session.last_seq
        await host.close()

    async def test_mode_changes_do_not_end_waits(self, tmp_path: Path) -> None:
        """A mode record is not Team activity: waiters keep waiting."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        await hold_open(host, root)
        waiting = asyncio.ensure_future(teams.wait_for_change(root, 10_000))
        await until(lambda: teams.activity.waiting("lead") == 1, what="the wait to be registered")
        await teams.set_enabled(root, False)
        await ready_work_ran()
        assert not waiting.done()
        await teams.dispose()
        assert (await waiting).timed_out is False
        await host.close()
