"""Quiescence at its edges: sleeping teammates with work, failed appends, disposal, and how it is shown.

Real host, real JSONL logs; the views are built from real folded logs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_team.mail.holdings import asleep_with_work
from dsh_team.views.show import build_show, show_quiescence
from dsh_team.views.show_text import render_text

from kit_waits import ready_work_ran, until
from team_builders import Log, member, task
from team_host import add_member, faulty_log, lead, open_host, service

HOUR = 3_600_000
SPLICE = {"target": "next-turn", "inserted": [{"id": "m1", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}]}


async def stored_child(host: Any, root: Any, session_id: str, *events: tuple[str, Any]) -> None:
    """A child session of ``root`` holding ``events``, flushed and released (asleep on disk)."""
    session = await host.create_session(session_id, parent_session=root.id)
    for kind, data in events:
        session.append(kind, data)
    await session.flush()
    await host.release_session(session)


def quiet_seqs(root: Any) -> list[int]:
    return [event.seq for event in root.session.events if event.type == "team/quiescent"]


class TestAsleepWithWork:
    @pytest.mark.parametrize(("events", "expected"), [
        ((("agent/inbox/spliced", SPLICE),), True),  # an accepted prompt nobody claimed
        ((("turn/start", {"turn": 1}),), True),  # a turn a crash left open
        ((("turn/start", {"turn": 1}), ("turn/end", {"turn": 1, "reason": {"kind": "completed"}})), False),
        ((), False),
    ])
    async def test_stored_sessions(self, tmp_path: Path, events: tuple[Any, ...], expected: bool) -> None:
        host = await open_host(tmp_path)
        root = await lead(host)
        await stored_child(host, root, "child-1", *events)
        assert await asleep_with_work(host.sessions, "child-1") is expected
        await host.close()

    async def test_live_and_unknown_sessions_have_none(self, tmp_path: Path) -> None:
        host = await open_host(tmp_path)
        root = await lead(host)
        root.session.append("turn/start", {"turn": 1})
        assert await asleep_with_work(host.sessions, root.id) is False  # live: its own agent decides
        assert await asleep_with_work(host.sessions, "nowhere") is False
        await host.close()


class TestWatch:
    async def test_a_sleeping_teammate_with_work_keeps_the_team_busy(self, tmp_path: Path) -> None:
        """The host is about to resume it, so a lone waiter is not told the Team is quiet."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        await stored_child(host, root, "child-1", ("agent/inbox/spliced", SPLICE))
        await add_member(host, root, "child-1", "alpha")
        waiting = asyncio.ensure_future(teams.wait_for_change(root, HOUR))
        await until(lambda: teams.activity.waiting("lead") == 1, what="the wait to be registered")
        await ready_work_ran()
        assert not waiting.done() and quiet_seqs(root) == []
        await teams.dispose()
        assert (await waiting).reason is None
        await host.close()

    async def test_a_failed_flush_is_logged_and_the_record_stays(self, tmp_path: Path) -> None:
        """An unconfirmed record is visible; the next flush makes it durable and announces it."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        await teams.create_task(root, subject="s", description="d")
        await host.quiesce()  # whatever the agent's start scheduled has run
        await teams.create_task(root, subject="t", description="d")  # a change nothing evaluates yet
        journal = teams.journals.get(root.session)
        before = quiet_seqs(root)
        gate = faulty_log(root.session, fail_at=[1])
        await teams.quiescence.evaluate(journal)  # raises nothing
        assert quiet_seqs(root) == [*before, root.session.last_seq] and journal.position < root.session.last_seq
        gate.fail_when(None)
        await journal.flush("retry")
        assert journal.position == quiet_seqs(root)[-1]
        await host.close()

    async def test_pokes_without_a_journal_or_after_disposal_do_nothing(self, tmp_path: Path) -> None:
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        journal = teams.journals.get(root.session)
        await teams.create_task(root, subject="s", description="d")
        await teams.quiescence.evaluate(journal)  # quiet with a ready task: one record (or the start's)
        await teams.quiescence.evaluate(journal)  # no change since: none more
        assert len(quiet_seqs(root)) == 1
        await teams.create_task(root, subject="t", description="d")  # a change: quiet again, news again
        teams.quiescence.poke("no-such-team")
        teams.quiescence.poke(root.id)
        teams.quiescence.poke(root.id)  # coalesced with the one scheduled
        await teams.dispose()  # before the scheduled evaluations ran
        await ready_work_ran()
        await teams.quiescence.evaluate(journal)
        assert len(quiet_seqs(root)) == 1
        await host.close()

    async def test_one_member_may_wait_twice(self, tmp_path: Path) -> None:
        """Two waits of one member: it stays parked until both ended."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        await add_member(host, root, "child-held", "held", phase="provisioning")  # never quiet
        first = asyncio.ensure_future(teams.wait_for_change(root, HOUR))
        second = asyncio.ensure_future(teams.wait_for_change(root, HOUR))
        await until(lambda: teams.activity.waiting("lead") == 2, what="both waits to be registered")
        assert teams.activity.parked("lead") == {root.id}
        await teams.create_task(root, subject="s", description="d")
        await first, await second
        assert teams.activity.parked("lead") == frozenset()
        await host.close()


class TestShown:
    def test_show_names_the_stalled_work_and_whether_it_is_current(self) -> None:
        log = Log()
        log.member("m1", "alpha", "provisioning")
        log.member("m1", "alpha", "active")
        log.member("m2", "ghost", "provisioning")
        log.member("m2", "ghost", "failed", error="boom")
        log.task("task-1")
        log.task("task-1", 2, status="in_progress", owner_id="m1")
        log.task("task-2")
        log.add("team/quiescent", {"version": 2, "team_id": "lead", "stalled": {
            "in_progress": [{"id": "task-1", "owner_id": "m1"}], "ready": ["task-2"], "failed": ["m2"]}})
        state = log.fold()
        shown = show_quiescence(state)
        assert shown is not None and shown.current and shown.seq == 8
        assert [(t.id, t.owner_name) for t in shown.in_progress] == [("task-1", "alpha")]
        assert (shown.ready, shown.failed) == (("task-2",), ("ghost",))
        text = render_text(build_show(state, session_id="lead", log_length=8, at=8))
        assert "Quiescence (last at seq 8; nothing changed since)" in text
        assert "in progress: task-1 (owner alpha)" in text and "ready, unclaimed: task-2" in text
        assert "failed member: ghost" in text
        log.task("task-2", 2, status="in_progress", owner_id="m1")
        later = render_text(build_show(log.fold(), session_id="lead", log_length=9, at=9))
        assert "Quiescence (last at seq 8; the Team changed since)" in later

    def test_a_team_never_quiet_and_a_quiet_team_with_nothing_stalled(self) -> None:
        log = Log()
        log.add("team/message/queued", {"version": 2, "team_id": "lead", "message": {
            "id": "msg-1", "sender_id": "lead", "sender_name": "lead", "target_id": "lead", "content": []}})
        assert "Quiescence\n  (none recorded)" in render_text(build_show(log.fold(), session_id="lead", log_length=1, at=1))
        quiet = Log()
        quiet.task("task-1")
        quiet.task("task-1", 2, status="completed", owner_id="lead")
        quiet.add("team/quiescent", {"version": 2, "team_id": "lead", "stalled": {}})
        text = render_text(build_show(quiet.fold(), session_id="lead", log_length=3, at=3))
        assert "  nothing stalled" in text
        assert member and task  # the builders module is shared: keep its imports honest
