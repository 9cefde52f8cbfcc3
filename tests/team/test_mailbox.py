"""The Lead-log mailbox: durable admission, framing, per-target order, de-duplication and limits (§6)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_team.errors import TeamError
from dsh_team.core.records import TEAM_MESSAGE_DELIVERED, TEAM_MESSAGE_QUEUED
from dsh_team.core.validation import check_content
from host_spec.events import EventType
from host_spec.messages import message_text, text_block
from host_spec.records import AbortSignal, CancelCause

from roster_kit import (
    PARK,
    faulty_log,
    Flushes,
    Gates,
    lead,
    of_type,
    open_team,
    parked_team,
    restored_modules,
    spawn,
    stored,
    stored_team,
    team_types,
    until,
    teams_of,
    until_released,
    user_texts,
)
from team_host import add_member

def text(value: str) -> list[dict[str, Any]]:
    return [text_block(value)]


class TestLeadDelivery:
    async def test_a_message_to_the_lead_is_steered_and_acknowledged(self, tmp_path: Path) -> None:
        """The Lead's inbox durably holds the framed message; nothing stays pending (case 26)."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        sent = await teams_of(host).send_message(worker, target=" lead ", content=text("report"))
        assert sent.status == "accepted" and sent.message_id.startswith("team-message-")
        inserted = [item for splice in of_type(root.session.events, EventType.INBOX_SPLICED) for item in splice.get("inserted", [])]
        mine = [item for item in inserted if item["id"] == sent.message_id]
        assert len(mine) == 1 and message_text(mine[0]["content"]) == f"Team message {sent.message_id} from worker:report"
        assert mine[0]["source"] == {
            "kind": "team-message", "team_id": "lead", "message_id": sent.message_id,
            "sender_id": worker.id, "sender_name": "worker",
        }  # fmt: skip
        state = teams_of(host).journals.get(root.session).state
        assert state.mail.pending_count("lead") == 0 and state.mail.is_delivered(sent.message_id)
        gates.open("worker")
        await host.close()

    async def test_each_queued_record_carries_its_queue_index(self, tmp_path: Path) -> None:
        """The writer numbers queued records 0, 1, 2, ... from the folded mailbox (what the fold checks)."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        sent = [await teams.send_message(root, target="worker", content=text(f"m{n}")) for n in range(3)]
        sent.append(await teams.send_message(worker, target="lead", content=text("back")))
        records = of_type(root.session.events, "team/message/queued")
        assert [(r["message"]["id"], r["index"]) for r in records] == [(s.message_id, n) for n, s in enumerate(sent)]
        assert teams.journals.get(root.session).state.mail.next_index == 4
        gates.open("worker")
        await host.close()

    async def test_a_busy_lead_holds_both_reports_in_durable_order_and_a_reload_adds_nothing(self, tmp_path: Path) -> None:
        """Two reports to a running Lead: splice, delivered, splice, delivered; a service reload resends nothing (case 27)."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker", lead_script=[PARK])
        root.followup(text_user("go"))
        await gates.parked("lead")
        teams = teams_of(host)
        first = await teams.send_message(worker, target="lead", content=text("one"))
        second = await teams.send_message(worker, target="lead", content=text("two"))
        assert (first.status, second.status) == ("accepted", "accepted")
        relevant = [
            (e.type, e.value().get("message_id") or [i["id"] for i in e.value().get("inserted", [])])
            for e in root.session.events
            if e.type in (EventType.INBOX_SPLICED, TEAM_MESSAGE_DELIVERED) and (e.type != EventType.INBOX_SPLICED or e.value().get("inserted"))
        ]
        assert relevant[-4:] == [
            (EventType.INBOX_SPLICED, [first.message_id]),
            (TEAM_MESSAGE_DELIVERED, first.message_id),
            (EventType.INBOX_SPLICED, [second.message_id]),
            (TEAM_MESSAGE_DELIVERED, second.message_id),
        ]
        before = root.session.last_seq
        with restored_modules("dsh_team"):
            await host.plugins.reload("dsh-team")
            for _ in range(50):
                await asyncio.sleep(0)  # the reloaded service's recovery had its chance
        assert root.session.last_seq == before
        gates.open("lead")
        gates.open("worker")
        await root.when_idle()
        await host.close()
        assert user_texts(stored(tmp_path, "lead")).count(f"Team message {first.message_id} from worker:one") == 1


class TestTeammateDelivery:
    async def test_a_running_teammate_gets_it_at_the_next_step_with_lead_target_lead_flushes(self, tmp_path: Path) -> None:
        """Each send to a busy teammate flushes exactly [Lead, target, Lead]; both wait in next-step (case 29)."""
        flushes = Flushes()
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker", flushes=flushes)
        teams = teams_of(host)
        ids = []
        for word in ("one", "two"):
            flushes.clear()
            sent = await teams.send_message(root, target="worker", content=text(word))
            assert sent.status == "accepted"
            assert flushes.sessions() == ["lead", worker.id, "lead"]
            ids.append(sent.message_id)
        assert [m.id for m in worker.inbox.next_step] == ids
        gates.open("worker")
        await host.close()

    async def test_concurrent_sends_to_one_target_are_admitted_in_durable_order(self, tmp_path: Path) -> None:
        """The second send waits for the first delivery; both are durable meanwhile; order is kept (case 30)."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        gate = faulty_log(worker.session, hold=False)
        gate.hold()
        first = asyncio.ensure_future(teams.send_message(root, target="worker", content=text("one")))
        await gate.wait_entered()
        second = asyncio.ensure_future(teams.send_message(root, target="worker", content=text("two")))
        journal = teams.journals.get(root.session)
        await until(lambda: journal.state.mail.pending_count(worker.id) == 2, what="both messages to be queued")
        await until_durable(root.session)
        queued = journal.state.mail.pending_for(worker.id)
        assert len(queued) == 2 and root.session.durable_seq == root.session.last_seq
        assert [m.id for m in worker.inbox.next_step] == [queued[0].id]  # the second waits its turn
        gate.release()
        results = await asyncio.gather(first, second)
        assert [r.status for r in results] == ["accepted", "accepted"]
        assert [m.id for m in worker.inbox.next_step] == [r.message_id for r in results]
        gates.open("worker")
        await host.close()

    async def test_an_inactive_sibling_is_cold_resumed_with_sender_attribution(self, tmp_path: Path) -> None:
        """Alpha messages beta on disk: beta's history holds one framed Team message from alpha (case 33)."""
        gates = Gates()
        host = await open_team(tmp_path, {"alpha": [PARK]}, gates=gates)
        root = await lead(host)
        alpha = host.agents.get((await spawn(host, root, "alpha")).id)
        beta = await spawn(host, root, "beta")
        await until_released(host, beta.id)
        await gates.parked("alpha")
        sent = await teams_of(host).send_message(alpha, target="beta", content=text("please review"))
        assert sent.status == "accepted"
        await until_released(host, beta.id)
        gates.open("alpha")
        await host.close()
        (message,) = [v for v in of_type(stored(tmp_path, beta.id), EventType.USER_MESSAGE) if v["source"]["kind"] == "team-message"]
        assert message["content"][0]["text"] == f"Team message {sent.message_id} from alpha:"
        assert message["content"][-1]["text"] == "please review"
        assert (message["source"]["message_id"], message["source"]["sender_name"], message["source"]["sender_id"]) == (
            sent.message_id, "alpha", alpha.id,
        )  # fmt: skip


class TestDeduplication:
    async def test_a_message_already_in_the_target_history_is_only_acknowledged(self, tmp_path: Path) -> None:
        """The target recorded it before the queued record: acknowledged, never inserted again (case 32)."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        coordination = teams.coordination
        message = await queue_only(teams, root, worker, "already seen")
        worker.session.append(EventType.USER_MESSAGE, team_message(message))
        before = len(worker.inbox.pending())
        assert await coordination.dispatcher.dispatch(journal, message.id, worker.id) is True
        assert len(worker.inbox.pending()) == before
        assert await coordination.dispatcher.acknowledge(journal, message) is True  # idempotent
        assert team_types(root.session.events).count(TEAM_MESSAGE_DELIVERED) == 1
        gates.open("worker")
        await host.close()

    async def test_a_live_pending_receipt_is_flushed_before_the_acknowledgement(self, tmp_path: Path) -> None:
        """Flush order [target, Lead]; one inbox copy (case 28)."""
        flushes = Flushes()
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker", flushes=flushes)
        teams = teams_of(host)
        message = await queue_only(teams, root, worker, "pending")
        worker.steer(team_message(message))
        flushes.clear()
        assert await teams.coordination.dispatcher.dispatch(teams.journals.get(root.session), message.id, worker.id)
        assert flushes.sessions() == [worker.id, "lead"]
        assert [m.id for m in worker.inbox.next_step].count(message.id) == 1
        gates.open("worker")
        await host.close()

    async def test_a_receipt_that_vanishes_during_its_flush_stays_queued(self, tmp_path: Path) -> None:
        """An inbox item discarded before the acknowledgement: no ``delivered``, the message stays pending (case 28)."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        message = await queue_only(teams, root, worker, "gone soon")
        worker.steer(team_message(message))
        gate = faulty_log(worker.session)
        gate.hold()
        acknowledging = asyncio.ensure_future(teams.coordination.dispatcher.acknowledge(journal, message))
        await gate.wait_entered()
        worker.inbox.clear()
        gate.release()
        assert await acknowledging is False
        assert journal.state.mail.pending_count(worker.id) == 1
        gates.open("worker")
        await host.close()

    async def test_a_receipt_that_arrives_during_the_flush_is_flushed_before_acknowledging(self, tmp_path: Path) -> None:
        """Held only after the flush began: flushed once more, then acknowledged."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        message = await queue_only(teams, root, worker, "late")
        worker.session.append("test/marker", {})
        gate = faulty_log(worker.session)
        gate.hold()
        acknowledging = asyncio.ensure_future(teams.coordination.dispatcher.acknowledge(journal, message))
        await gate.wait_entered()
        worker.steer(team_message(message))
        gate.release()
        assert await acknowledging is True and gate.writes == 2
        gates.open("worker")
        await host.close()


class TestFailuresStayQueued:
    async def test_an_unreadable_target_log_leaves_the_message_queued(self, tmp_path: Path) -> None:
        """A persisted read failure: status ``queued``, nothing delivered, a warning (case 32)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until_released(host, view.id)
        log = tmp_path / "data" / "sessions"
        (path,) = [p for p in log.rglob("session.jsonl") if view.id in str(p)]
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(lines[0] + b"{garbage\n" + b"".join(lines[1:]))
        sent = await teams_of(host).send_message(root, target="worker", content=text("hello"))
        assert sent.status == "queued"
        assert teams_of(host).journals.get(root.session).state.mail.pending_count(view.id) == 1
        await host.close()
        assert team_types(stored(tmp_path, "lead"))[-1] == TEAM_MESSAGE_QUEUED

    async def test_a_host_delivery_refusal_leaves_the_message_queued(self, tmp_path: Path) -> None:
        """A rostered child the host cannot resume (no descriptor): ``queued`` (case 32)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        child = await host.create_session("child-x", parent_session="lead")
        child.append("test/marker", {})
        await host.release_session(child)
        await add_member(host, root, "child-x", "plain")
        sent = await teams_of(host).send_message(root, target="plain", content=text("hello"))
        assert sent.status == "queued" and host.sessions.get("child-x") is None
        await host.close()

    async def test_a_failed_lead_acknowledgement_is_retried_when_the_target_records_it(self, tmp_path: Path) -> None:
        """The delivered record could not be flushed: ``queued``; the target's claim acknowledges it later (case 43)."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        faulty_log(root.session, fail_at=[2])  # the queued record's write succeeds, the delivered one's fails
        sent = await teams.send_message(root, target="worker", content=text("ack me"))
        assert sent.status == "queued"
        gates.open("worker")  # the worker claims it at its next step: the observer acknowledges
        await worker.when_idle()
        await host.quiesce()
        assert journal.state.mail.is_delivered(sent.message_id)
        await host.close()
        assert stored_team(tmp_path).mail.is_delivered(sent.message_id)

    async def test_a_send_whose_flush_failed_is_delivered_once_a_later_flush_succeeds(self, tmp_path: Path) -> None:
        """Unconfirmed send: pending shows on the roster; the next durable flush delivers it on its own."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        faulty = faulty_log(root.session)
        faulty.fail_when(lambda n: True)
        with pytest.raises(TeamError) as caught:
            await teams.send_message(root, target="worker", content=text("late"))
        assert caught.value.code == "TEAM_PERSISTENCE_UNCONFIRMED"
        (message_id,) = journal.state.mail.messages
        assert message_id in caught.value.message and "pending" in caught.value.message
        rows = {row.name: row.pending for row in teams.list_members(root)}
        assert rows == {"lead": 0, "worker": 1}  # the model can see it is queued
        for _ in range(20):
            await asyncio.sleep(0)
        assert not journal.state.mail.is_delivered(message_id)
        faulty.fail_when(None)
        root.session.append("test/marker", {})  # an unrelated later flush
        await root.session.flush()
        await until(lambda: journal.state.mail.is_delivered(message_id), what="delivery after the flush")
        assert [row.pending for row in teams.list_members(root)] == [0, 0]
        gates.open("worker")
        await worker.when_idle()
        await host.quiesce()
        assert user_texts(worker.session.events).count(f"Team message {message_id} from lead:late") == 1
        await host.close()
        assert stored_team(tmp_path).mail.is_delivered(message_id)


class TestLimits:
    async def test_size_pending_self_and_unknown_targets_are_refused_without_a_trace(self, tmp_path: Path) -> None:
        """TOO_LARGE, MAILBOX_FULL (after a queued one), SELF_MESSAGE, MEMBER_NOT_FOUND (case 34)."""
        host = await open_team(tmp_path, config={"max_message_bytes": 256, "max_pending_messages_per_member": 1})
        root = await lead(host)
        await add_member(host, root, "child-x", "sleeper")  # no stored log: deliveries fail, mail stays queued
        await add_member(host, root, "child-p", "pending", "provisioning")
        await add_member(host, root, "child-f", "broken", "failed")
        teams = teams_of(host)

        async def refused(target: Any, content: Any, code: str, caller: Any = root) -> None:
            before = root.session.last_seq
            with pytest.raises(TeamError) as caught:
                await teams.send_message(caller, target=target, content=content)
            assert caught.value.code == code, (target, caught.value)
            assert root.session.last_seq == before

        await refused("sleeper", text("x" * 300), "TEAM_MESSAGE_TOO_LARGE")
        first = await teams.send_message(root, target="sleeper", content=text("small"))
        assert first.status == "queued"
        await refused("sleeper", text("again"), "TEAM_MAILBOX_FULL")
        await refused("lead", text("me"), "TEAM_SELF_MESSAGE")
        for target in ("nobody", "pending", "broken"):
            await refused(target, text("hi"), "TEAM_MEMBER_NOT_FOUND")
        await refused(3, text("hi"), "TEAM_INVALID_ARGUMENT")
        for content in ([], "text", [{"type": "text", "text": 1}], [{"type": "tool-result"}], [{"type": "text", "text": float("nan")}]):
            await refused("sleeper", content, "TEAM_INVALID_ARGUMENT")
        await host.close()

    def test_content_is_deep_copied_at_admission(self) -> None:
        """Content is deep-copied: later edits by the caller do not change what was queued."""
        blocks = [{"type": "text", "text": "hi", "extra": {"k": [1]}}]
        copied = check_content(blocks)
        blocks[0]["extra"]["k"].append(2)
        assert copied == ({"type": "text", "text": "hi", "extra": {"k": [1]}},)


class TestAbort:
    async def test_a_pre_aborted_send_writes_nothing(self, tmp_path: Path) -> None:
        """An abort before enqueue raises its reason (exception as is, else TEAM_DISPOSED)."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        before = root.session.last_seq
        error = ValueError("caller gave up")
        for reason, expected in ((error, error), (CancelCause("user"), "TEAM_DISPOSED")):
            signal = AbortSignal()
            signal.abort(reason)
            with pytest.raises(BaseException) as caught:
                await teams.send_message(root, target="worker", content=text("x"), signal=signal)
            assert caught.value is expected or getattr(caught.value, "code", None) == expected
        assert root.session.last_seq == before
        gates.open("worker")
        await host.close()

    async def test_an_abort_after_enqueue_reports_queued_and_delivery_goes_on(self, tmp_path: Path) -> None:
        """The message is durable: the sender learns ``queued``; the delivery still lands."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        gate = faulty_log(worker.session)
        gate.hold()
        signal = AbortSignal()
        sending = asyncio.ensure_future(teams.send_message(root, target="worker", content=text("x"), signal=signal))
        await gate.wait_entered()
        signal.abort(CancelCause("user"))
        sent = await sending
        assert sent.status == "queued"
        gate.release()
        await until(lambda: teams.journals.get(root.session).state.mail.is_delivered(sent.message_id),
                    what="the queued message to be delivered")
        gates.open("worker")
        await host.close()


class TestWaiting:
    async def test_roster_mailbox_and_quiescence_wake_waiters(self, tmp_path: Path) -> None:
        """A lone Lead's wait is quiescent at once; a send ends a wait; a teammate going idle ends one
        only by leaving the Team quiet."""
        gates = Gates()
        host = await open_team(tmp_path, {"worker": [PARK]}, gates=gates)
        root = await lead(host)
        teams = teams_of(host)
        alone = await teams.wait_for_change(root, 3_600_000)  # nobody else: quiescent at once
        assert alone.reason == "quiescent"

        async def woken_by(action: Any) -> Any:
            waiting = asyncio.ensure_future(teams.wait_for_change(root, 3_600_000))
            await until(lambda: teams.activity.waiting("lead") == 1, what="the wait to be registered")
            await action()
            result = await waiting
            assert result.timed_out is False
            return result

        again = await teams.wait_for_change(root, 3_600_000)  # still quiet: the same answer, no second record
        assert (again.position, again.reason, again.stalled) == (alone.position, alone.reason, alone.stalled)
        view = [await spawn(host, root, "worker")]
        after = await teams.wait_for_change(root, 3_600_000, since=alone.position)
        assert after.position > alone.position and after.reason is None
        await gates.parked("worker")
        assert (await woken_by(lambda: teams.send_message(root, target="worker", content=text("hi")))).reason is None

        async def finish() -> None:
            gates.open("worker")

        quiet = await woken_by(finish)  # running -> idle, "hi" read: nothing can change any more
        assert quiet.reason == "quiescent" and quiet.stalled is not None
        await until_released(host, view[0].id)
        await host.close()


# ---------------------------------------------------------------- helpers


async def until_durable(session: Any) -> None:
    await until(lambda: session.durable_seq == session.last_seq, what=f"{session.id} to become durable")


def text_user(value: str) -> Any:
    from host_spec.messages import user_message

    return user_message(value)


async def queue_only(teams: Any, root: Any, target: Any, value: str) -> Any:
    """Append a queued record without dispatching it (what a crash right after the queue leaves)."""
    from dsh_team.core.records import VERSION, MessageQueuedRecord
    from dsh_team.core.snapshots import TeamMessageSnapshot
    from dsh_team.log.journal import Append

    journal = teams.journals.get(root.session)
    message = TeamMessageSnapshot(
        id=f"team-message-{value.replace(' ', '-')}", sender_id=root.id, sender_name="lead", target_id=target.id,
        content=(text_block(value),),
    )  # fmt: skip
    record = MessageQueuedRecord(version=VERSION, team_id=root.id, message=message)
    await journal.transact(lambda state: Append(TEAM_MESSAGE_QUEUED, record), lambda state: None, what="queue")
    return message


def team_message(message: Any) -> Any:
    from dsh_team.mail import team_user_message

    return team_user_message("lead", message)
