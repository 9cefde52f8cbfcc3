"""Quiescence through the real service: one record when nothing can progress, never an idle ping.

Teammates are real children on the reference host, held "running" in a gated
``block`` tool until the test opens their gate; every record is read back from the
Lead's real log.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_team.core.records import StalledTask, TeamStalled
from host_spec.errors import DshError

from roster_kit import parked_team, ready_work_ran, spawn, teams_of, until

HOUR = 3_600_000


def quiet_seqs(root: Any) -> list[int]:
    return [event.seq for event in root.session.events if event.type == "team/quiescent"]


async def registered(teams: Any, coro: Any, count: int = 1) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(coro)
    await until(lambda: teams.activity.waiting("lead") >= count or task.done(), what="the wait to be registered")
    return task


async def idle(host: Any, agent: Any) -> None:
    await until(lambda: host.agents.get(agent.id) is None or host.agents.get(agent.id).status == "idle",
                what=f"{agent.name} to stop running")


class TestOneSignal:
    async def test_the_last_member_to_stop_causes_one_record_and_nobody_before(self, tmp_path: Path) -> None:
        """A member going idle while another runs wakes nobody; the last one leaves one record naming the stalled work."""
        host, root, gates, (alpha, beta) = await parked_team(tmp_path, "alpha", "beta")
        teams = teams_of(host)
        await teams.create_task(root, subject="a", description="d")
        await teams.update_task(alpha, task_id="task-1", expected_revision=1, action="claim")
        await teams.create_task(root, subject="b", description="d")
        waiting = await registered(teams, teams.wait_for_change(root, HOUR))
        gates.open("alpha")
        await idle(host, alpha)
        await ready_work_ran()
        assert not waiting.done() and quiet_seqs(root) == []  # beta still runs: no idle ping for alpha
        gates.open("beta")
        result = await waiting
        assert result.reason == "quiescent" and result.timed_out is False
        assert result.stalled == TeamStalled(in_progress=(StalledTask("task-1", alpha.id),), ready=("task-2",))
        assert quiet_seqs(root) == [result.position]
        again = await teams.wait_for_change(root, HOUR)  # nothing changed: the same answer at once
        assert (again.position, again.reason, again.stalled) == (result.position, result.reason, result.stalled)
        await host.quiesce()
        assert quiet_seqs(root) == [result.position]  # idle edges and waits without a change add nothing
        await host.close()

    async def test_a_change_after_the_record_allows_exactly_one_more(self, tmp_path: Path) -> None:
        """The next record needs a Team change; the Lead's own claim is one, and the next quiet spell names it."""
        host, root, gates, (alpha,) = await parked_team(tmp_path, "alpha")
        teams = teams_of(host)
        await teams.create_task(root, subject="a", description="d")
        gates.open("alpha")
        first = await teams.wait_for_change(root, HOUR)
        assert first.stalled == TeamStalled(ready=("task-1",))
        await teams.update_task(root, task_id="task-1", expected_revision=1, action="claim")
        second = await teams.wait_for_change(root, HOUR, since=first.position)
        assert second.reason is None and second.position > first.position  # the claim itself
        third = await teams.wait_for_change(root, HOUR)
        assert third.reason == "quiescent" and third.stalled == TeamStalled(in_progress=(StalledTask("task-1", root.id),))
        assert quiet_seqs(root) == [first.position, third.position]
        await host.close()

    async def test_members_waiting_on_each_other_are_woken_by_one_record(self, tmp_path: Path) -> None:
        """Two teammates parked in waits and an idle Lead: nothing can change, so both waits end on one record."""
        host, root, gates, (alpha, beta) = await parked_team(tmp_path, "alpha", "beta")
        teams = teams_of(host)
        first = await registered(teams, teams.wait_for_change(alpha, HOUR))
        await ready_work_ran()
        assert not first.done()  # beta runs
        second = await registered(teams, teams.wait_for_change(beta, HOUR), count=2)
        one, two = await first, await second
        assert (one.position, one.stalled) == (two.position, two.stalled) and one.reason == two.reason == "quiescent"
        assert quiet_seqs(root) == [one.position]
        gates.open("alpha")
        gates.open("beta")
        await host.quiesce()
        assert quiet_seqs(root) == [one.position]  # they stopped without changing anything
        await host.close()

    async def test_a_failed_member_is_stalled_work(self, tmp_path: Path) -> None:
        """A member whose provisioning failed is stalled work (by id in the record; the tool names it)."""
        host, root, gates, (alpha,) = await parked_team(tmp_path, "alpha")
        teams = teams_of(host)
        with pytest.raises(DshError):
            await spawn(host, root, "ghost", provider="missing")
        ghost = next(m for m in teams.list_members(root) if m.name == "ghost")
        gates.open("alpha")
        result = await teams.wait_for_change(root, HOUR)
        assert result.stalled == TeamStalled(failed=(ghost.id,))
        await host.close()

    async def test_mail_keeps_the_team_busy_until_it_is_read(self, tmp_path: Path) -> None:
        """Mail is progress still to come: the record comes only after the Lead read it and all stopped."""
        host, root, gates, (alpha,) = await parked_team(tmp_path, "alpha")
        teams = teams_of(host)
        waiting = await registered(teams, teams.wait_for_change(root, HOUR))
        sent = await teams.send_message(alpha, target="lead", content=[{"type": "text", "text": "hi"}])
        result = await waiting  # the message is a change: it ends the wait, with no reason
        assert result.reason is None and quiet_seqs(root) == []  # alpha still runs
        gates.open("alpha")
        await host.quiesce()  # the Lead reads the message in a turn of its own, then all stop
        state = teams.journals.get(root.session).state
        assert state.mail.status(sent.message_id) == "read" and len(quiet_seqs(root)) == 1
        assert quiet_seqs(root)[0] > max(e.seq for e in root.session.events if e.type == "team/message/read")
        await host.close()
