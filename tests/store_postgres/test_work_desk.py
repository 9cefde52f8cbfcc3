"""The work desk against a real server: taking, answering, fencing, recovery and withdrawal.

The oracle is the desk's own table read back through the poster's handle: a
call has exactly one answer, and it is the rightful holder's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from host_spec.errors import SessionLockedError
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.postgres import PostgresStore

from host_spec.host.store.postgres.work import UNKNOWN_OUTCOME, WorkDesk, member_key, worker_key



Opener = Callable[..., PostgresStore]

def _claim(store: PostgresStore, member: str) -> tuple[WorkDesk, int]:
    desk = WorkDesk(store)
    epoch = store.leases.acquire(member_key(member), member)
    desk.recover(member, epoch)
    return desk, epoch


def _expire(store: PostgresStore) -> None:
    """Freeze ``store`` as a holder: it stops renewing, and its leases run out."""
    store.leases.close()
    time.sleep(store.leases.lease_seconds + 0.2)


class TestPostingAndAnswering:
    def test_a_holder_takes_calls_in_posting_order_and_its_answers_reach_the_poster(self, open_store: Opener) -> None:
        lead, worker = open_store(), open_store()
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
        lead, worker = open_store(), open_store()
        for member in ("m1", "m2", "m3"):
            WorkDesk(lead).post(f"{member}-call", "root", member, "model", b"{}")
        desk, first = _claim(worker, "m1")
        _, second = _claim(worker, "m2")
        taken = desk.take({"m1": first, "m2": second, "m3": 7})  # m3's lease is not held: nothing of it
        assert [(t.member, t.key) for t in taken] == [("m1", "m1-call"), ("m2", "m2-call")]
        assert desk.still_mine({"m1": first, "m2": second}) == {"m1-call", "m2-call"}
        assert desk.still_mine({"m1": first + 1}) == set()

    def test_only_the_lease_holder_takes_a_members_calls(self, open_store: Opener) -> None:
        lead, holder, other = open_store(), open_store(), open_store()
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


class TestFencing:
    def test_a_frozen_holders_answer_is_refused_and_its_calls_are_recovered(self, open_store: Opener) -> None:
        lead, stale, fresh = open_store(), open_store(lease_seconds=0.6), open_store()
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
        lead, worker = open_store(), open_store()
        WorkDesk(lead).post("k", "root", "m1", "tool", b"t")
        desk, epoch = _claim(worker, "m1")
        desk.take({"m1": epoch})
        desk.recover("m1", epoch)  # its own calls stay its own
        assert desk.still_mine({"m1": epoch}) == {"k"}
        assert desk.finish("k", epoch, b"ok")


class TestWithdrawal:
    def test_a_withdrawn_call_is_not_taken_and_its_late_answer_is_dropped(self, open_store: Opener) -> None:
        lead, worker = open_store(), open_store()
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


class TestLayout:
    def test_a_layout_one_database_gets_the_desk_on_first_use(self, open_store: Opener) -> None:
        first = open_store()
        assert first.exists("nothing") is False  # creates the current layout
        with psycopg.connect(first.url) as conn:
            conn.execute("DROP TABLE dsh_work")
            conn.execute("DELETE FROM dsh_schema")
            conn.execute("INSERT INTO dsh_schema (version) VALUES (1)")
        upgraded = PostgresStore(first.url)
        try:
            WorkDesk(upgraded).post("k", "root", "m1", "model", b"{}")
            assert WorkDesk(upgraded).outcome("k").state == "queued"  # type: ignore[union-attr]
        finally:
            upgraded.close()
        with psycopg.connect(first.url) as conn:
            assert conn.execute("SELECT max(version) FROM dsh_schema").fetchone() == (2,)


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
