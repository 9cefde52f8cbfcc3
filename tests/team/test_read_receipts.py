"""Read receipts: the fold of ``team/message/read``, the target-log rule, and the live service.

The oracle of the rule is :func:`naive_read`: a Team message is read exactly when
its target's own log has an ``assistant/message`` after the ``user/message`` that
recorded it. Every service test compares the Lead log's receipts against it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import immutables
import msgspec
import pytest
from structlog.testing import capture_logs

from dsh_team.core.records import TEAM_MESSAGE_READ
from dsh_team.core.snapshots import TeamMessageSnapshot
from dsh_team.mail import team_user_message
from dsh_team.mail.receipts import scan_receipts
from host_spec.events import Event, EventType
from host_spec.messages import text_block

from roster_kit import faulty_log, of_type, parked_team, stored, stored_team, teams_of, until
from team_builders import TEAM, Log, event
from test_mailbox_recovery import queue_only

REPLY = {"turn": 1, "step": 1, "content": []}


def naive_read(events: list[Event], team_id: str) -> set[str]:
    """Team message ids recorded in ``events`` and followed by an assistant reply (the oracle)."""
    recorded: list[tuple[int, str]] = []
    replies: list[int] = []
    for index, item in enumerate(events):
        if item.type == EventType.ASSISTANT_MESSAGE:
            replies.append(index)
        elif item.type == EventType.USER_MESSAGE:
            source = item.value().get("source")
            if not isinstance(source, dict) or not isinstance(source.get("message_id"), str):
                continue
            # The user's Team mail has the core "user" kind and the same ids (it is the user speaking).
            if source.get("kind") in ("team-message", "user") and source.get("team_id") == team_id:
                recorded.append((index, source["message_id"]))
    return {message_id for index, message_id in recorded if any(reply > index for reply in replies)}


def user(seq: int, message_id: str, *, team_id: str = TEAM, kind: str = "team-message") -> Event:
    source = {"kind": kind, "team_id": team_id, "message_id": message_id}
    return event(seq, EventType.USER_MESSAGE, {"id": f"u-{message_id}", "content": [text_block("x")], "source": source})


def reply(seq: int) -> Event:
    return event(seq, EventType.ASSISTANT_MESSAGE, {"turn": 1, "step": 1, "content": []})


class TestFold:
    def test_queued_delivered_read(self) -> None:
        """A message goes queued -> delivered -> read; a receipt keeps the wait position."""
        log = Log()
        log.queued("msg-1", "m1")
        log.queued("msg-2", "m1")
        assert log.fold().mail.status("msg-1") == "queued" and log.fold().mail.message("nope") is None
        log.delivered("msg-1", "m1")
        log.delivered("msg-2", "m1")
        state = log.fold()
        assert state.mail.status("msg-1") == "delivered" and state.mail.unread_count("m1") == 2
        assert [m.id for m in state.mail.unread_for("m1")] == ["msg-1", "msg-2"] and state.mail.unread_for("m2") == ()
        log.read("msg-2", "m1")
        after = log.fold()
        assert after.position == state.position  # a receipt wakes no wait
        assert (after.mail.status("msg-1"), after.mail.status("msg-2")) == ("delivered", "read")
        log.read("msg-1", "m1")
        done = log.fold()
        assert done.mail.unread_count("m1") == 0 and "m1" not in done.mail.unread and done.mail.is_read("msg-1")
        assert done.mail.messages == immutables.Map()  # both settled: the mailbox keeps no read message

    @pytest.mark.parametrize(
        ("steps", "failure"),
        [
            ([("r", "msg-1", "m1")], 'team message "msg-1" was read before delivery (or read already)'),
            ([("q", "msg-1", "m1"), ("r", "msg-1", "m1")],
             'team message "msg-1" was read before delivery (or read already)'),
            ([("q", "msg-1", "m1"), ("d", "msg-1", "m1"), ("r", "msg-1", "m2")], 'team message "msg-1" target changed'),
            # A read message is settled: a second receipt finds no open message (the same rule as a first
            # receipt for a message never queued), so the stream still breaks.
            ([("q", "msg-1", "m1"), ("d", "msg-1", "m1"), ("r", "msg-1", "m1"), ("r", "msg-1", "m1")],
             'team message "msg-1" was read before delivery (or read already)'),
        ],
    )  # fmt: skip
    def test_receipt_relations(self, steps: list[tuple[str, str, str]], failure: str) -> None:
        """Early, retargeted and repeated receipts break the stream (the invariant vetoes them)."""
        log = Log()
        for kind, message_id, target in steps:
            {"q": log.queued, "d": log.delivered, "r": log.read}[kind](message_id, target)
        failure_ = log.fold().failure
        assert failure_.message == failure
        assert failure_.rule == ("message-target-changed" if "target" in failure else "message-read-before-delivered")

    def test_an_older_version_receipt_is_unsupported(self) -> None:
        """Receipts did not exist in version 1: such a record fails loudly instead of being guessed."""
        log = Log()
        log.queued("msg-1", "m1")
        log.delivered("msg-1", "m1")
        log.read("msg-1", "m1", version=1)
        assert log.fold().failure.rule == "unsupported-version"


class TestScan:
    @pytest.mark.parametrize(
        "events",
        [
            [],
            [user(1, "a"), reply(2)],
            [user(1, "a"), user(2, "b"), reply(3), user(4, "c")],
            [reply(1), user(2, "a", team_id="other"), reply(3), user(4, "b", kind="user")],
            [reply(1), user(2, "a", kind="plugin"), reply(3), user(4, "b", kind="user"), reply(5)],
            [event(1, EventType.USER_MESSAGE, {"id": "x", "content": []}), reply(2)],
            [event(1, EventType.USER_MESSAGE, {"id": "x", "source": {"kind": "team-message", "team_id": TEAM, "message_id": 7}})],
            [event(1, EventType.USER_MESSAGE, {"id": "x", "source": {"kind": "team-message", "team_id": 3}})],
            [event(1, EventType.USER_MESSAGE, {"source": 5})],
        ],
    )
    def test_scan_matches_the_naive_rule(self, events: list[Event]) -> None:
        """``read`` equals the oracle; ``seen`` is what was recorded after the last reply."""
        read, seen = scan_receipts(events, TEAM)
        assert set(read) == naive_read(events, TEAM)
        later = events[max([i for i, e in enumerate(events) if e.type == EventType.ASSISTANT_MESSAGE], default=-1) + 1 :]
        assert set(seen) == {m for m in naive_read([*later, reply(99)], TEAM)}


def receipts(tmp_path: Path) -> list[str]:
    return [value["message_id"] for value in of_type(stored(tmp_path, TEAM), TEAM_MESSAGE_READ)]


def text(value: str) -> list[dict[str, Any]]:
    return [text_block(value)]


class TestService:
    async def test_a_message_is_unread_until_the_target_replies_then_read_once(self, tmp_path: Path) -> None:
        """Delivered to a busy worker: unread in list_agents; its next completed step makes it read, once."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        sent = await teams.send_message(root, target="worker", content=text("ping"))
        journal = teams.journals.get(root.session)
        assert journal.state.mail.status(sent.message_id) == "delivered"
        rows = {row.name: row for row in teams.list_members(root)}
        assert (rows["worker"].unread, rows["lead"].unread) == (1, 0)
        gates.open("worker")
        await until(lambda: journal.state.mail.is_read(sent.message_id), what="the receipt")
        await host.close()
        assert receipts(tmp_path) == [sent.message_id]
        assert naive_read(stored(tmp_path, worker.id), TEAM) == {sent.message_id}
        assert stored_team(tmp_path).mail.unread_count(worker.id) == 0

    async def test_a_message_to_the_lead_is_read_at_the_leads_next_reply(self, tmp_path: Path) -> None:
        """The Lead's own steps produce receipts too; a running target's reply before the splice reads nothing."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        sent = await teams.send_message(worker, target="lead", content=text("report"))
        journal = teams.journals.get(root.session)
        await until(lambda: journal.state.mail.is_read(sent.message_id), what="the Lead's receipt")
        gates.open("worker")
        await host.close()
        assert receipts(tmp_path) == [sent.message_id]
        assert naive_read(stored(tmp_path, TEAM), TEAM) == {sent.message_id}


class TestEdges:
    async def test_forged_unknown_unheld_failing_and_late_receipts_are_contained(self, tmp_path: Path) -> None:
        """Only a held message of a known Team gets a receipt; a failing or late one is dropped, never raised."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        receipts_ = teams.coordination.receipts
        journal = teams.journals.get(root.session)
        first = await queue_only(host, root, worker.id, "team-message-1")
        worker.session.append(EventType.USER_MESSAGE, team_user_message("lead", first))
        ghost = TeamMessageSnapshot(id="team-message-x", sender_id="s", sender_name="s", target_id=worker.id, content=())
        worker.session.append(EventType.USER_MESSAGE, team_user_message("ghost", ghost))  # no such Team
        unknown = msgspec.structs.replace(ghost, id="team-message-y")
        worker.session.append(EventType.USER_MESSAGE, team_user_message("lead", unknown))  # no such message
        worker.session.append(EventType.ASSISTANT_MESSAGE, REPLY)
        await until(lambda: journal.state.mail.is_read(first.id), what="the first receipt")
        worker.session.append(EventType.USER_MESSAGE, team_user_message("lead", first))
        worker.session.append(EventType.ASSISTANT_MESSAGE, REPLY)  # already read: nothing new
        unheld = await queue_only(host, root, worker.id, "team-message-2")
        assert await receipts_.mark(journal, unheld) is False  # its target does not hold it
        held = await queue_only(host, root, worker.id, "team-message-3")
        worker.session.append(EventType.USER_MESSAGE, team_user_message("lead", held))
        await until(lambda: journal.state.mail.is_delivered(held.id), what="the third delivery")
        fault = faulty_log(root.session)
        fault.fail_when(lambda n: True)
        with capture_logs() as captured:
            worker.session.append(EventType.ASSISTANT_MESSAGE, REPLY)
            await until(lambda: any(e["event"] == "team.read_receipt_failed" for e in captured), what="the failure")
        fault.fail_when(None)
        assert not journal.state.mail.is_read(held.id)
        late = await queue_only(host, root, worker.id, "team-message-4")
        worker.session.append(EventType.USER_MESSAGE, team_user_message("lead", late))
        await until(lambda: journal.state.mail.is_delivered(late.id), what="the fourth delivery")
        inbox = await teams.send_message(root, target="worker", content=text("only in the inbox"))
        # Reconciliation reads the worker's log: the third was replied to, the fourth not yet,
        # the fifth is not in its history at all.
        assert await receipts_.reconcile(worker) == 1
        assert journal.state.mail.is_read(held.id) and not journal.state.mail.is_read(late.id)
        assert journal.state.mail.status(inbox.message_id) == "delivered"
        worker.session.append(EventType.ASSISTANT_MESSAGE, REPLY)
        teams.lifecycle.close()  # before the scheduled receipt runs
        for _ in range(20):
            await asyncio.sleep(0)
        assert not journal.state.mail.is_read(late.id)
        gates.open("worker")
        await host.close()
        assert receipts(tmp_path).count(first.id) == 1 and unheld.id not in receipts(tmp_path)
