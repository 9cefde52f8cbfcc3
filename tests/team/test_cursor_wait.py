"""Cursor waits through the real service: the delta after ``since`` equals what a re-read shows.

A real host with JSONL files and a real teammate (parked in ``block`` so it is
"running" until its gate opens). The oracle is a re-read through the service's
own read operations (``list_members``, ``list_tasks``) plus each message's status
in the folded mailbox: applying a wait's delta to the read taken at ``since``
must give the re-read, for random operation sequences and every earlier cursor,
and again after the host is closed and the Team resumed.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_team.core import TeamDelta, list_views
from dsh_team.log.waits import StatusMarks
from dsh_team.service import TeamService
from host_spec.messages import text_block

from team_builders import apply_delta, logged_mail
from test_team_crash import DRIVER, logs, read_oracle
from test_team_crash import SCRIPT as CRASH_SCRIPT
from roster_kit import lead, open_team, parked_team, resume_lead, teams_of, until

TEN_S = 10_000


def read(teams: TeamService, caller: Any) -> dict[str, Any]:
    """What ``caller`` sees now, read through the service (never through the change index)."""
    state = teams.journals.get(teams.membership(caller).root.session).state
    rows = teams.list_members(caller)
    return {
        "members": {row.name: row.status for row in rows if row.id != caller.id},
        "tasks": {view.id: (view.status, view.revision, view.owner_name) for view in teams.list_tasks(caller)},
        "mail": {row.name: (row.pending, row.unread, state.mail.read_count(row.id)) for row in rows},
        # Every message the Lead log queued, its status from the log's own mail records.
        "sent": {
            message_id: (sender, next(r.name for r in rows if r.id == target), status)
            for message_id, (sender, target, status) in logged_mail(teams.membership(caller).root.session.events).items()
        },
    }  # fmt: skip


async def at_once(teams: TeamService, caller: Any, since: int) -> TeamDelta:
    """A wait with ``since`` that must return at once (a change after it exists)."""
    result = await asyncio.wait_for(teams.wait_for_change(caller, TEN_S, since=since), 5)
    assert result.timed_out is False and result.position > since and result.delta is not None
    assert result.delta.since == since
    return result.delta


async def settled(teams: TeamService, root: Any) -> None:
    """Wait until the Lead has read all its mail and is idle (its receipts are in: a read is stable)."""

    def quiet() -> bool:
        lead = teams.list_members(root)[0]
        return (lead.pending, lead.unread, lead.status) == (0, 0, "inactive")

    await until(quiet, what="the Lead to read its mail")


async def random_step(teams: TeamService, rng: random.Random, root: Any, worker: Any) -> None:
    """One random valid operation by the Lead or the teammate."""
    actor = rng.choice([root, worker])
    tasks = teams.list_tasks(actor)
    choice = rng.random()
    if choice < 0.35 or not tasks:
        await teams.create_task(actor, subject=f"s{rng.randrange(99)}", description="d")
    elif choice < 0.75:
        view = rng.choice(tasks)
        actor = {"lead": root, "worker": worker}.get(view.owner_name or "", actor)  # owners mutate their tasks
        action = {"pending": "claim", "in_progress": rng.choice(["complete", "release"]),
                  "completed": rng.choice(["reopen", "delete"])}[view.status]  # fmt: skip
        await teams.update_task(actor, task_id=view.id, expected_revision=view.revision, action=action)
    else:
        target = "worker" if actor is root else "lead"
        if actor is worker or teams.list_members(root)[1].pending < 3:
            await teams.send_message(actor, target=target, content=[text_block(f"m{rng.randrange(99)}")])


class TestCursorDelta:
    async def test_a_cursor_wait_reports_tasks_mail_members_and_message_statuses(self, tmp_path: Path) -> None:
        """Every kind of change after ``since`` is in the delta, and the delta applied to the old read is the re-read."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        since = teams.position(root)
        before = read(teams, root)
        created = await teams.create_task(worker, subject="parse", description="d")
        await teams.update_task(worker, task_id=created.id, expected_revision=1, action="claim")
        sent = await teams.send_message(root, target="worker", content=[text_block("ping")])
        queued_at = [e.seq for e in root.session.events if e.type == "team/message/queued"]
        assert sent.position == queued_at[0] > since  # the send names the position of its queued record
        gates.open("worker")
        await until(lambda: journal.state.mail.is_read(sent.message_id), what="the receipt")
        await until(lambda: teams.list_members(root)[1].status == "inactive", what="the worker to finish its turn")
        delta = await at_once(teams, root, since)
        assert [(t.id, t.status, t.revision, t.owner_name) for t in delta.tasks] == [
            ("task-1", "in_progress", 2, "worker")]
        assert [(m.target, m.queued, m.unread, m.read) for m in delta.mail] == [("worker", 0, 0, 1)]
        assert [(s.message_id, s.sender, s.target, s.status) for s in delta.sent] == [
            (sent.message_id, "lead", "worker", "read")]
        assert [(m.target, m.status) for m in delta.members] == [("worker", "inactive")]
        assert apply_delta(before, delta) == read(teams, root)
        await host.close()

    async def test_a_wait_without_since_reports_what_changed_while_it_waited(self, tmp_path: Path) -> None:
        """No ``since``: the delta starts at the position the wait started from; earlier changes are not in it."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        await teams.create_task(root, subject="old", description="d")
        waiting = asyncio.ensure_future(teams.wait_for_change(root, TEN_S))
        await until(lambda: teams.activity.waiting(root.id) == 1, what="the wait to be registered")
        await teams.create_task(worker, subject="new", description="d")
        result = await waiting
        assert result.delta is not None and [t.id for t in result.delta.tasks] == ["task-2"]
        gates.open("worker")
        await host.close()

    async def test_a_live_status_change_is_in_the_delta_of_the_quiescence_that_follows(self, tmp_path: Path) -> None:
        """The teammate's turn ends: no idle ping, but the Team is quiet now, and that wait's delta names the new status."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        since = teams.position(root)
        waiting = asyncio.ensure_future(teams.wait_for_change(root, TEN_S, since=since))
        await until(lambda: teams.activity.waiting(root.id) == 1, what="the wait to be registered")
        gates.open("worker")
        result = await waiting
        assert result.timed_out is False and result.reason == "quiescent" and result.delta is not None
        assert result.position > since  # the quiescence record is the only change
        assert [(m.target, m.status) for m in result.delta.members] == [("worker", "inactive")]
        assert result.delta.tasks == () and result.delta.sent == ()
        await host.close()

    async def test_a_teammate_sees_only_its_own_messages(self, tmp_path: Path) -> None:
        """The Lead's delta lists every member's messages; a teammate's only the ones it sent."""
        host, root, gates, (alpha, beta) = await parked_team(tmp_path, "alpha", "beta")
        teams = teams_of(host)
        since = teams.position(root)
        mine = await teams.send_message(alpha, target="beta", content=[text_block("a->b")])
        theirs = await teams.send_message(beta, target="alpha", content=[text_block("b->a")])
        assert {s.message_id for s in (await at_once(teams, root, since)).sent} == {mine.message_id, theirs.message_id}
        assert [s.message_id for s in (await at_once(teams, alpha, since)).sent] == [mine.message_id]
        gates.open("alpha")
        gates.open("beta")
        await host.close()


class TestDifferential:
    @pytest.mark.timeout_s(240)
    @pytest.mark.parametrize("seed", range(4))
    async def test_random_operations_then_every_earlier_cursor(self, tmp_path: Path, seed: int) -> None:
        """After random operations, for every earlier cursor: old read + delta == re-read (before and after a resume)."""
        rng = random.Random(seed)
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        seen: list[tuple[int, dict[str, Any]]] = []
        for _ in range(14):
            await settled(teams, root)
            seen.append((teams.position(root), read(teams, root)))
            await random_step(teams, rng, root, worker)
        await settled(teams, root)
        end = teams.position(root)
        now = read(teams, root)
        for since, before in seen:
            if since < end:
                assert apply_delta(before, await at_once(teams, root, since)) == now, since
        gates.open("worker")
        await until(lambda: teams.list_members(root)[1].status == "inactive", what="the worker to finish its turn")
        await host.close()

        host = await open_team(tmp_path)
        root = await resume_lead(host)
        teams = teams_of(host)
        await host.quiesce()
        await settled(teams, root)
        now = read(teams, root)
        assert teams.position(root) >= end  # resume may deliver or acknowledge, never go back
        for since, before in seen:
            if since < teams.position(root):
                assert apply_delta(before, await at_once(teams, root, since)) == now, since
        await host.close()


class TestEdges:
    def test_marks_of_a_team_this_process_never_opened_report_everyone(self) -> None:
        """Unopened: every member may have changed; opened: only members marked at or after the cursor."""
        marks = StatusMarks()
        assert marks.after("t", 5, ["a", "b"]) == {"a", "b"}
        marks.opened("t", 3)
        marks.opened("t", 9)  # the first position is kept
        marks.changed("t", "a", 7)
        assert marks.after("t", 4, ["a", "b"]) == {"a"}
        assert marks.after("t", 3, ["a", "b"]) == {"a", "b"}
        assert marks.after("t", 8, ["a", "b"]) == set()

    async def test_no_delta_for_a_stranger_or_a_failed_stream_and_no_mark_without_a_journal(self, tmp_path: Path) -> None:
        """A caller that is no member and a corrupt Team stream get ``None``; an unknown Team is not marked."""
        host = await open_team(tmp_path)
        root = await lead(host)
        teams = teams_of(host)
        teams.cursors.status_changed("no-such-team", "m")
        assert teams.cursors.marks.after("no-such-team", 0, ["m"]) == {"m"}  # still unopened
        assert teams.cursors.delta(object(), 0) is None  # type: ignore[arg-type]
        await teams.create_task(root, subject="s", description="d")
        root.session.append("team/task", {"version": 2, "team_id": root.id, "task": {"id": "task-9"}})
        assert teams.journals.get(root.session).state.failure is not None
        assert teams.cursors.delta(root, 0) is None
        await host.close()


def offline_read(state: Any, lead_events: list[Any]) -> dict[str, Any]:
    """What the Lead could have read at ``state`` (a crashed log folded offline; statuses are offline ones)."""
    names = {state.team_id: "lead", **{m.id: m.name for m in state.members.listed()}}
    mail = state.mail
    return {
        "members": {m.name: ("inactive" if m.phase == "active" else m.phase) for m in state.members.listed()},
        "tasks": {t.id: (t.status, t.revision, t.owner_name) for t in list_views(state)},
        "mail": {name: (mail.pending_count(key), mail.unread_count(key), mail.read_count(key)) for key, name in names.items()},
        "sent": {m: (sender, names[target], status) for m, (sender, target, status) in logged_mail(lead_events).items()},
    }


class TestCrash:
    @pytest.mark.slow
    @pytest.mark.timeout_s(300)
    @pytest.mark.parametrize("point", ["after-queued", "after-recorded", "after-reply"])
    async def test_a_cursor_from_before_a_sigkill_gets_the_exact_delta_after_resume(self, tmp_path: Path, point: str) -> None:
        """A real ``dsh run`` SIGKILLed mid-mail; after an in-process resume, the Lead's cursor from the crashed
        log gets a delta that turns the crashed read into the re-read, and every status matches the logs."""
        data = tmp_path / "data"
        script = tmp_path / "script.json"
        script.write_text(json.dumps(CRASH_SCRIPT))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(DRIVER.parent), os.environ.get("PYTHONPATH")]))}
        crashed = subprocess.run([sys.executable, str(DRIVER), str(data), str(script), point, "build the thing"],
                                 env=env, capture_output=True, timeout=120)  # fmt: skip
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr.decode()[-2000:]
        root_id, before_state, before_events = logs(data)
        since, before = before_state.position, offline_read(before_state, before_events[root_id])
        host = await open_team(tmp_path, CRASH_SCRIPT)
        root = host.start_agent(await host.resume_session(root_id), name="lead", source="resume")
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        await until(lambda: not journal.state.mail.pending, what="delivery")
        await host.quiesce()
        if teams.position(root) == since:
            # Only receipts were rebuilt, and a receipt never ends a wait: the next change does, and its
            # delta carries the receipts too.
            assert point == "after-reply"
            waiting = asyncio.ensure_future(teams.wait_for_change(root, TEN_S, since=since))
            await until(lambda: teams.activity.waiting(root.id) == 1, what="the wait to be registered")
            await teams.create_task(root, subject="after the crash", description="d")
            result = await waiting
            assert result.delta is not None
            delta = result.delta
        else:
            delta = await at_once(teams, root, since)  # recovery acknowledged what the crash left queued
        now = read(teams, root)
        assert apply_delta(before, delta) == now
        await host.close()
        _, state, events = logs(data)
        statuses = {m: status for m, (_, _, status) in logged_mail(events[root_id]).items()}
        assert statuses == {m: ("read" if m in read_oracle(root_id, state, events) else "delivered") for m in statuses}
        assert statuses == {m: state.mail.status(m) for m in statuses}  # the fold agrees with its log
        assert {m: s for m, (_, _, s) in now["sent"].items()} == statuses
