"""The work desk against a real server: taking, answering, fencing, recovery and withdrawal.

The oracle is the desk's own table read back through the poster's handle: a
call has exactly one answer, and it is the rightful holder's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from host_spec.errors import SessionFencedError, SessionLockedError
from host_spec.events import SessionHeader
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.postgres import PostgresStore
from host_spec.host.store.postgres.schema import SCHEMA_VERSION
from host_spec.host.store.postgres.work import UNKNOWN_OUTCOME, WorkDesk, member_key, worker_key
from host_spec.testing import make_events



Opener = Callable[..., PostgresStore]

def _claim(store: PostgresStore, member: str) -> tuple[WorkDesk, int]:
    desk = WorkDesk(store)
    epoch = store.leases.acquire(member_key(member), member)
    desk.recover(member, epoch)
    return desk, epoch


def _lead(store: PostgresStore) -> PostgresStore:
    """``store`` as the Lead's process: it holds the Team (root ``root``), so it may post its members' calls.

    A call is queued only while some worker can take it; these tests are about
    what happens to a queued call, so a presence that says no room (every worker
    of the older layout) is made under the Lead's own name: there is always room.
    """
    _holding(store).leases.acquire(worker_key("lead-room"), "lead-room")
    return store


def _holding(store: PostgresStore) -> PostgresStore:
    """``store`` holding the Team (root ``root``) and nothing else: its calls are queued only where a worker has room."""
    store.leases.acquire("root", "root")
    return store


def _expire(store: PostgresStore) -> None:
    """Freeze ``store`` as a holder: it stops renewing, and its leases run out."""
    store.leases.close()
    time.sleep(store.leases.lease_seconds + 0.2)


class TestPostingAndAnswering:
    def test_a_holder_takes_calls_in_posting_order_and_its_answers_reach_the_poster(self, open_store: Opener) -> None:
        lead, worker = _lead(open_store()), open_store()
        poster = WorkDesk(lead)
        for number in range(3):
            poster.post(f"k{number}", "root", "m1", "model", b'{"n": %d}' % number)
        poster.post("k0", "root", "m1", "model", b"again")  # a retried post queues nothing new
        assert WorkDesk(worker).wanted(10) == ["m1"]
        desk, epoch = _claim(worker, "m1")
        taken = desk.take({"m1": epoch})
        assert [t.key for t in taken] == ["k0", "k1", "k2"] and taken[0].request == b'{"n": 0}'
        assert desk.take({"m1": epoch}) == []  # each call is taken once
        assert desk.take({}) == []
        assert WorkDesk(worker).wanted(10) == []  # a held member is not wanted
        outcome = poster.outcome("k1")
        assert outcome is not None and outcome.state == "taken" and outcome.holder_live
        assert desk.finish("k1", epoch, b"answer")
        done = poster.outcome("k1")
        assert done is not None and (done.state, done.result) == ("done", b"answer")
        assert not desk.finish("k1", epoch, b"twice")  # answered once
        assert poster.outcome("k1").result == b"answer"  # type: ignore[union-attr]
        poster.settle("k2")  # not answered yet: nothing to settle
        assert poster.outcome("k2").state == "taken"  # type: ignore[union-attr]
        poster.settle("k1")
        poster.settle("k1")  # a retried statement settles once
        with psycopg.connect(lead.url) as conn:  # settled: the payloads are gone, who ran it and when stay
            row = conn.execute("SELECT state, request, result, holder, taken_at IS NOT NULL, answered_at IS NOT NULL "
                               "FROM dsh_work WHERE key = 'k1'").fetchone()
        assert row == ("settled", b"", None, worker.holder, True, True)
        assert poster.outcome("nope") is None

    def test_one_take_serves_every_held_member_and_says_whose_each_call_is(self, open_store: Opener) -> None:
        lead, worker = _lead(open_store()), open_store()
        for member in ("m1", "m2", "m3"):
            WorkDesk(lead).post(f"{member}-call", "root", member, "model", b"{}")
        desk, first = _claim(worker, "m1")
        _, second = _claim(worker, "m2")
        taken = desk.take({"m1": first, "m2": second, "m3": 7})  # m3's lease is not held: nothing of it
        assert [(t.member, t.key) for t in taken] == [("m1", "m1-call"), ("m2", "m2-call")]
        assert desk.still_mine({"m1": first, "m2": second}) == {"m1-call", "m2-call"}
        assert desk.still_mine({"m1": first + 1}) == set()

    def test_only_the_lease_holder_takes_a_members_calls(self, open_store: Opener) -> None:
        lead, holder, other = _lead(open_store()), open_store(), open_store()
        WorkDesk(lead).post("k", "root", "m1", "tool", b"{}")
        desk, epoch = _claim(holder, "m1")
        with pytest.raises(SessionLockedError):
            other.leases.acquire(member_key("m1"), "m1")
        assert WorkDesk(other).take({"m1": epoch}) == []  # the epoch is not the other's to use
        assert [t.key for t in desk.take({"m1": epoch})] == ["k"]

    def test_live_workers_are_counted_by_their_presence_leases(self, open_store: Opener) -> None:
        lead, worker = open_store(), open_store(lease_seconds=0.5)
        assert WorkDesk(lead).live_workers() == 0
        worker.leases.acquire(worker_key(worker.holder), worker.holder)
        assert WorkDesk(lead).live_workers() == 1
        worker.leases.release(worker_key(worker.holder))
        assert WorkDesk(lead).live_workers() == 0


class TestRoom:
    def test_a_call_is_posted_only_when_a_live_worker_holds_its_member_or_has_room(self, open_store: Opener) -> None:
        lead, worker = _holding(open_store()), open_store(lease_seconds=1.0)
        poster, desk = WorkDesk(lead), WorkDesk(worker)
        worker.leases.acquire(worker_key(worker.holder), worker.holder)
        assert poster.post("old", "root", "m1", "model", b"{}")  # a presence that says nothing: room, as before
        desk.present(0, 1)
        assert poster.post("room", "root", "m1", "model", b"{}")
        _claim(worker, "m1")
        desk.present(1, 1)  # full
        assert poster.post("held", "root", "m1", "tool", b"{}")  # its holder runs every call of m1, full or not
        assert not poster.post("full", "root", "m2", "model", b"{}")  # nobody can take m2's call: not queued
        assert not poster.post("full", "root", "m2", "model", b"{}")
        with psycopg.connect(lead.url) as conn:
            keys = [row[0] for row in conn.execute("SELECT key FROM dsh_work ORDER BY n")]
            assert conn.execute("SELECT held, capacity FROM dsh_leases WHERE key = %s",
                                (worker_key(worker.holder),)).fetchone() == (1, 1)
        assert keys == ["old", "room", "held"]
        desk.present(0, 1)  # m1 let go: room again
        assert poster.post("again", "root", "m2", "model", b"{}")
        worker.leases.release(worker_key(worker.holder))  # the worker stops: its room is no one's
        assert not poster.post("gone", "root", "m3", "model", b"{}")
        with pytest.raises(SessionFencedError):  # room or not, a Team not held is fenced first
            WorkDesk(open_store()).post("other", "root", "m3", "model", b"{}")

    def test_a_queued_call_no_worker_can_take_any_more_reads_unplaceable(self, open_store: Opener) -> None:
        lead, worker = _holding(open_store()), open_store()
        poster, desk = WorkDesk(lead), WorkDesk(worker)
        worker.leases.acquire(worker_key(worker.holder), worker.holder)
        desk.present(0, 1)
        assert poster.post("k1", "root", "m1", "model", b"{}") and poster.post("k2", "root", "m2", "model", b"{}")
        assert poster.outcome("k2").placeable  # type: ignore[union-attr]
        _, epoch = _claim(worker, "m1")
        desk.present(1, 1)  # the last slot went to m1: m2's call waits for nobody
        assert not poster.outcome("k2").placeable  # type: ignore[union-attr]
        assert poster.outcome("k1").placeable  # type: ignore[union-attr]  # m1's holder takes it
        [taken] = desk.take({"m1": epoch})
        assert taken.key == "k1" and poster.outcome("k1").placeable  # type: ignore[union-attr]  # not queued


class TestFencing:
    def test_a_frozen_holders_answer_is_refused_and_its_calls_are_recovered(self, open_store: Opener) -> None:
        lead, stale, fresh = _lead(open_store()), open_store(lease_seconds=0.6), open_store()
        poster = WorkDesk(lead)
        poster.post("model-call", "root", "m1", "model", b"m")
        poster.post("tool-call", "root", "m1", "tool", b"t")
        desk, epoch = _claim(stale, "m1")
        assert len(desk.take({"m1": epoch})) == 2
        _expire(stale)
        outcome = poster.outcome("tool-call")
        assert outcome is not None and outcome.state == "taken" and not outcome.holder_live
        assert WorkDesk(fresh).wanted(10) == ["m1"]  # taken by a dead holder: wanted again
        new_desk, new_epoch = _claim(fresh, "m1")
        assert new_epoch == epoch + 1
        # the model call is asked again, the tool call may have run: it is answered unknown
        assert poster.outcome("tool-call").result == UNKNOWN_OUTCOME  # type: ignore[union-attr]
        assert [t.key for t in new_desk.take({"m1": new_epoch})] == ["model-call"]
        assert not desk.finish("model-call", epoch, b"stale")  # the frozen holder comes back: fenced
        assert not desk.finish("tool-call", epoch, b"stale")
        assert new_desk.finish("model-call", new_epoch, b"fresh")
        assert poster.outcome("model-call").result == b"fresh"  # type: ignore[union-attr]
        assert poster.outcome("tool-call").result == UNKNOWN_OUTCOME  # type: ignore[union-attr]

    def test_a_claim_recovers_only_what_an_older_epoch_took(self, open_store: Opener) -> None:
        lead, worker = _lead(open_store()), open_store()
        WorkDesk(lead).post("k", "root", "m1", "tool", b"t")
        desk, epoch = _claim(worker, "m1")
        desk.take({"m1": epoch})
        desk.recover("m1", epoch)  # its own calls stay its own
        assert desk.still_mine({"m1": epoch}) == {"k"}
        assert desk.finish("k", epoch, b"ok")


class TestWithdrawal:
    def test_a_withdrawn_call_is_not_taken_and_its_late_answer_is_dropped(self, open_store: Opener) -> None:
        lead, worker = _lead(open_store()), open_store()
        poster = WorkDesk(lead)
        poster.post("queued", "root", "m1", "model", b"q")
        assert poster.withdraw("queued", taken_too=False)
        desk, epoch = _claim(worker, "m1")
        assert desk.take({"m1": epoch}) == []
        poster.post("running", "root", "m1", "tool", b"r")
        desk.take({"m1": epoch})
        assert not poster.withdraw("running", taken_too=False)  # taken: only an interrupt takes it back
        assert poster.withdraw("running", taken_too=True)
        assert desk.still_mine({"m1": epoch}) == set()  # the holder sees it withdrawn and aborts it
        assert not desk.finish("running", epoch, b"late")
        assert poster.outcome("running").state == "withdrawn"  # type: ignore[union-attr]


def _team(store: PostgresStore) -> Any:
    """A stored Team: root ``root`` and its member ``m1``, written by ``store`` (which holds the Team).

    As in :func:`_lead`, a presence without a room said keeps a worker's room open.
    """
    store.leases.acquire(worker_key("lead-room"), "lead-room")
    root = store.create(SessionHeader(id="root", created_at=1))
    root.append(make_events(1, 1), expected_seq=0)
    root.sync()
    mate = store.create(SessionHeader(id="m1", created_at=2, parent_session="root"))
    mate.append(make_events(1, 1), expected_seq=0)
    mate.sync()
    return root, mate


def _lease(url: str, key: str) -> tuple[str | None, int]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT holder, epoch FROM dsh_leases WHERE key = %s", (key,)).fetchone()
    assert row is not None
    return row[0], int(row[1])


class TestTeamEpoch:
    def test_a_process_that_does_not_hold_the_team_cannot_post_its_members_calls(self, open_store: Opener) -> None:
        lead, stranger = _lead(open_store()), open_store()
        with pytest.raises(SessionFencedError, match="no longer held by this process"):
            WorkDesk(stranger).post("k", "root", "m1", "model", b"{}")
        assert WorkDesk(lead).outcome("k") is None  # nothing was posted
        lead.leases.release("root")
        with pytest.raises(SessionFencedError):  # a process that let its Team go posts nothing either
            WorkDesk(lead).post("k", "root", "m1", "model", b"{}")

    def test_a_takeover_closes_the_old_holders_rows_and_fences_its_members_leases(self, open_store: Opener) -> None:
        old, worker, new = open_store(lease_seconds=0.6), open_store(), open_store()
        worker.leases.acquire(worker_key(worker.holder), worker.holder)  # a worker alive throughout
        _team(old)
        poster = WorkDesk(old)
        for key, kind in (("queued", "model"), ("running", "tool"), ("answered", "model")):
            poster.post(key, "root", "m1", kind, b"r")
        desk, epoch = _claim(worker, "m1")
        assert {t.key: t.team_epoch for t in desk.take({"m1": epoch})} == {"queued": 1, "running": 1, "answered": 1}
        assert desk.finish("answered", epoch, b"never recorded")
        poster.post("late", "root", "m1", "model", b"r")  # still queued at the takeover
        _expire(old)  # the Lead's process froze: its Team lease runs out
        log, _ = new.resume("root")  # the new holder: take_over runs before it reads the Team
        assert log.epoch == 2
        states = {key: WorkDesk(new).outcome(key) for key in ("queued", "running", "answered", "late")}
        assert {key: (o.state, o.result) for key, o in states.items() if o} == {
            "queued": ("withdrawn", None), "running": ("withdrawn", None), "answered": ("settled", None),
            "late": ("withdrawn", None)}
        assert not any(o.team_held for o in states.values() if o)  # the old poster's rows: its Team moved on
        holder, member_epoch = _lease(new.url, member_key("m1"))
        assert holder is None and member_epoch == epoch + 1  # the member's lease under the old Team is void
        assert not desk.finish("running", epoch, b"late answer")  # refused: fenced and closed
        assert desk.still_mine({"m1": epoch}) == set()  # the worker sees it closed and aborts it
        with pytest.raises(SessionFencedError):
            poster.post("after", "root", "m1", "model", b"r")  # the old holder can post nothing now
        worker.leases.renew()
        assert member_key("m1") in worker.leases.lost  # its renewal finds the lease fenced
        WorkDesk(new).post("fresh", "root", "m1", "model", b"again")  # the new holder's calls run as usual
        assert WorkDesk(worker).wanted(10) == ["m1"]
        again = open_store()
        desk2, epoch2 = _claim(again, "m1")
        (taken,) = desk2.take({"m1": epoch2})
        assert (taken.key, taken.team_epoch) == ("fresh", 2)
        assert desk2.finish("fresh", epoch2, b"answer")
        assert WorkDesk(new).outcome("fresh").team_held  # type: ignore[union-attr]
        log.close()

    def test_an_answer_under_an_old_team_epoch_is_refused_even_by_a_live_member_holder(self, open_store: Opener) -> None:
        old, worker, new = _lead(open_store(lease_seconds=0.6)), open_store(), open_store()
        WorkDesk(old).post("k", "root", "m1", "tool", b"t")
        desk, epoch = _claim(worker, "m1")
        desk.take({"m1": epoch})
        _expire(old)
        assert new.leases.acquire("root", "root") == 2  # a claim alone (no take_over yet: no session rows here)
        assert not desk.finish("k", epoch, b"answer")  # the member lease is live, the Team epoch is not
        assert WorkDesk(new).wanted(10) == []  # and nobody wants a call of a Team epoch gone by

    def test_a_teams_settled_history_is_pruned_past_a_bound(self, open_store: Opener) -> None:
        lead, worker = _lead(open_store()), open_store()
        poster = WorkDesk(lead)
        desk, epoch = _claim(worker, "m1")
        for number in range(8):
            poster.post(f"k{number}", "root", "m1", "model", b"r")
            desk.take({"m1": epoch})
            desk.finish(f"k{number}", epoch, b"a")
            poster.settle(f"k{number}")
        poster.post("open", "root", "m1", "model", b"r")
        poster.prune("root", keep=3)
        with psycopg.connect(lead.url) as conn:
            keys = [row[0] for row in conn.execute("SELECT key FROM dsh_work ORDER BY n").fetchall()]
        assert keys == ["k5", "k6", "k7", "open"]  # the newest three settled rows and every open one
        poster.prune("root", keep=3)
        with psycopg.connect(lead.url) as conn:
            assert conn.execute("SELECT count(*) FROM dsh_work").fetchone() == (4,)


class TestLayout:
    def test_a_layout_one_database_gets_the_desk_on_first_use(self, open_store: Opener) -> None:
        first = open_store()
        assert first.exists("nothing") is False  # creates the current layout
        with psycopg.connect(first.url) as conn:
            conn.execute("DROP TABLE dsh_work")
            conn.execute("ALTER TABLE dsh_leases DROP COLUMN held, DROP COLUMN capacity, DROP COLUMN last_holder")
            conn.execute("DELETE FROM dsh_schema")
            conn.execute("INSERT INTO dsh_schema (version) VALUES (1)")
        upgraded = _lead(PostgresStore(first.url))
        try:
            WorkDesk(upgraded).post("k", "root", "m1", "model", b"{}")
            assert WorkDesk(upgraded).outcome("k").state == "queued"  # type: ignore[union-attr]
        finally:
            upgraded.close()
        with psycopg.connect(first.url) as conn:
            assert conn.execute("SELECT max(version) FROM dsh_schema").fetchone() == (SCHEMA_VERSION,)
            assert conn.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = 'dsh_leases' "
                                "AND column_name IN ('held', 'capacity', 'last_holder')").fetchone() == (3,)
            assert conn.execute("SELECT to_regclass('dsh_checkpoints') IS NOT NULL").fetchone() == (True,)


class TestRunHere:
    async def test_a_call_no_worker_takes_runs_in_the_leads_process(self, open_store: Opener, tmp_path: Any) -> None:
        url = open_store().url
        silent = open_store()  # a worker that is alive but never takes anything (every worker full)
        silent.leases.acquire(worker_key(silent.holder), silent.holder)
        script = {"lead": [{"tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "m", "description": "d", "context": "fresh", "prompt": "p"}}]}, {"text": "spawned"}],
                  "m": [{"text": "member done"}]}
        host = await Host.open(url, "agent-teams", ScriptedModel.from_mapping(script))
        try:
            await host.run("go", cwd=str(tmp_path))
        finally:
            await host.close()
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT kind, state FROM dsh_work").fetchall()
        assert rows and set(rows) == {("model", "withdrawn")}  # posted, not taken, taken back, run here
        store = open_store()
        (member,) = [s for s in store.list_ids() if s != "session-1"]
        texts = [e.value() for e in store.read(member)[1] if e.type == "assistant/message"]
        assert any(block.get("text") == "member done" for message in texts for block in message["content"])

    async def test_a_call_no_live_worker_has_room_for_runs_here_without_being_posted(
            self, open_store: Opener, tmp_path: Any) -> None:
        url = open_store().url
        full = open_store()  # a live worker whose presence says it is full
        full.leases.acquire(worker_key(full.holder), full.holder)
        WorkDesk(full).present(2, 2)
        script = {"lead": [{"tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "m", "description": "d", "context": "fresh", "prompt": "p"}}]}, {"text": "spawned"}],
                  "m": [{"tool_calls": [{"name": "write_file", "arguments": {"path": "m.txt", "content": "here\n"}}]},
                        {"text": "member done"}]}
        host = await Host.open(url, "agent-teams", ScriptedModel.from_mapping(script))
        try:
            await host.run("go", cwd=str(tmp_path))
            ran_here = dict(host.placement.ran_here)
        finally:
            await host.close()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM dsh_work").fetchone() == (0,)  # never posted, never withdrawn
        assert ran_here == {"model": 2, "tool": 1}  # the member's two model calls and its write, all here
        assert (tmp_path / "m.txt").read_text() == "here\n"

    async def test_a_queued_call_whose_last_slot_went_elsewhere_is_taken_back_without_the_grace(
            self, open_store: Opener, tmp_path: Any) -> None:
        url = open_store().url
        worker = open_store()  # a worker with one free slot, which a member of another Team takes meanwhile
        worker.leases.acquire(worker_key(worker.holder), worker.holder)
        WorkDesk(worker).present(0, 1)
        script = {"lead": [{"tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "m", "description": "d", "context": "fresh", "prompt": "p"}}]}, {"text": "spawned"}],
                  "m": [{"text": "member done"}]}
        host = await Host.open(url, "agent-teams", ScriptedModel.from_mapping(script))
        host.placement.grace_seconds = 3600.0  # the grace never ends here: only the room can send the call back
        try:
            running = asyncio.ensure_future(host.run("go", cwd=str(tmp_path)))
            while not await asyncio.to_thread(_queued, url):
                assert not running.done()
                await asyncio.sleep(0.02)
            WorkDesk(worker).present(1, 1)  # the slot is gone
            await asyncio.wait_for(running, 60)
            ran_here = dict(host.placement.ran_here)
        finally:
            await host.close()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT kind, state FROM dsh_work").fetchall() == [("model", "withdrawn")]
        assert ran_here == {"model": 1, "tool": 0}


def _queued(url: str) -> bool:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM dsh_work WHERE state = 'queued'").fetchone() == (1,)
