"""Queued mail across restarts and member starts: retried in order, acknowledged without duplicates (§6.3-6.4)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from dsh_team.core.records import TEAM_MESSAGE_DELIVERED, TEAM_MESSAGE_QUEUED, VERSION, MessageQueuedRecord
from dsh_team.core.snapshots import TeamMessageSnapshot
from dsh_team.log.journal import Append
from dsh_team.mail import team_user_message
from host_spec import hookimpl
from host_spec.events import EventType, InboxSplice
from host_spec.messages import text_block, user_message

from roster_kit import (
    BLOCK,
    faulty_log,
    Gates,
    history_ids,
    lead,
    OnSession,
    open_team,
    parked_team,
    pending_ids,
    resume_lead,
    spawn,
    stored,
    stored_team,
    team_types,
    teams_of,
    until_released,
)
from kit_waits import ready_work_ran, until


async def queue_only(host: Any, root: Any, target_id: str, message_id: str, value: str = "hello") -> TeamMessageSnapshot:
    """Append a queued record without dispatching it (a crash right after the queue leaves exactly this)."""
    message = TeamMessageSnapshot(
        id=message_id, sender_id=root.id, sender_name="lead", target_id=target_id, content=(text_block(value),)
    )
    record = MessageQueuedRecord(version=VERSION, team_id=root.id, message=message)
    journal = teams_of(host).journals.get(root.session)
    await journal.transact(lambda state: Append(TEAM_MESSAGE_QUEUED, record), lambda state: None, what="queue")
    return message


class Starts:
    """Records which sessions were activated (a cold resume shows up here)."""

    def __init__(self) -> None:
        self.created: list[str] = []

    @hookimpl
    def dsh_session_created(self, host: Any, session: Any) -> None:
        self.created.append(session.id)


async def team_on_disk(tmp_path: Path) -> str:
    """A first process: a Lead with one settled teammate ``worker``; returns the worker's id."""
    host = await open_team(tmp_path)
    root = await lead(host)
    view = await spawn(host, root, "worker")
    await until_released(host, view.id)
    await host.close()
    return view.id


def occurrences(events: Any, message_id: str) -> int:
    return history_ids(events).count(message_id) + pending_ids(events).count(message_id)


class TestRestart:
    async def test_queued_mail_is_delivered_by_recovery_exactly_once(self, tmp_path: Path) -> None:
        """A message queued before a crash reaches the teammate through a cold resume after restart (12.2 case 3)."""
        worker_id = await team_on_disk(tmp_path)
        host = await open_team(tmp_path)
        root = await resume_lead(host)
        await queue_only(host, root, worker_id, "team-message-a", "late news")
        await host.close()
        again = await open_team(tmp_path, {"worker": [{"when": "late news", "text": "thanks"}]})
        await resume_lead(again)
        await again.quiesce()
        await again.close()
        assert occurrences(stored(tmp_path, worker_id), "team-message-a") == 1
        assert "team-message-a" in history_ids(stored(tmp_path, worker_id))
        assert stored_team(tmp_path).mail.is_delivered("team-message-a")

    async def test_mail_the_target_held_before_the_crash_is_never_duplicated(self, tmp_path: Path) -> None:
        """Recorded: only acknowledged, target not resumed (12.2 case 4); pending only: the target is woken to
        work it off, still one copy (12.2 case 5, plus liveness: mail must reach the history)."""
        worker_id = await team_on_disk(tmp_path)
        host = await open_team(tmp_path)
        root = await resume_lead(host)

        def snapshot(message_id: str) -> TeamMessageSnapshot:
            return TeamMessageSnapshot(id=message_id, sender_id="lead", sender_name="lead", target_id=worker_id, content=(text_block("hello"),))

        # The target recorded both before the queued records were committed (the crash window).
        session = await host.resume_session(worker_id)
        session.append(EventType.USER_MESSAGE, team_user_message("lead", snapshot("team-message-h")))
        item = team_user_message("lead", snapshot("team-message-p"))
        session.append(EventType.INBOX_SPLICED, InboxSplice(target="next-step", inserted=[{
            "id": item.id, "role": "user", "content": item.content, "source": item.source}]))  # fmt: skip
        await host.release_session(session)
        await queue_only(host, root, worker_id, "team-message-h")
        await queue_only(host, root, worker_id, "team-message-p")
        await host.close()
        starts = Starts()
        again = await open_team(tmp_path, plugins=[starts])
        await resume_lead(again)
        await again.quiesce()
        assert starts.created.count(worker_id) == 1  # woken once, for the pending one
        await again.close()
        events = stored(tmp_path, worker_id)
        assert occurrences(events, "team-message-h") == 1 and occurrences(events, "team-message-p") == 1
        assert {"team-message-h", "team-message-p"} <= set(history_ids(events))
        mail = stored_team(tmp_path).mail
        assert mail.is_delivered("team-message-h") and mail.is_delivered("team-message-p")

    async def test_a_teammate_start_retries_the_mail_addressed_to_it(self, tmp_path: Path) -> None:
        """A teammate woken by other work picks up its queued Team mail through its own recovery."""
        host = await open_team(tmp_path)
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until_released(host, view.id)
        await queue_only(host, root, view.id, "team-message-w", "for the worker")
        await host.continuations.deliver(root, view.id, [text_block("plain work")], source={"kind": "user"})
        await host.quiesce()
        assert teams_of(host).journals.get(root.session).state.mail.is_delivered("team-message-w")
        await host.close()
        assert occurrences(stored(tmp_path, view.id), "team-message-w") == 1

    async def test_later_mail_waits_for_earlier_mail_to_the_same_target(self, tmp_path: Path) -> None:
        """The dispatch of a later message first delivers the earlier queued one: inbox order [earlier, later] (case 31)."""
        resumes: list[str] = []

        def first_resume_fails(session: Any) -> Any:
            if session.header.parent_session and session.last_seq and not resumes:
                resumes.append(session.id)
                return faulty_log(session, fail_at=[1])
            return None

        faults = OnSession(first_resume_fails)
        host = await open_team(tmp_path, plugins=[faults])
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until_released(host, view.id)
        teams = teams_of(host)
        earlier = await teams.send_message(root, target="worker", content=[text_block("earlier")])
        assert earlier.status == "queued"  # the resumed child's first write failed
        later = await teams.send_message(root, target="worker", content=[text_block("later")])
        assert later.status == "accepted"
        await host.quiesce()
        await host.close()
        events = stored(tmp_path, view.id)
        ids = [i for i in history_ids(events) + pending_ids(events) if i.startswith("team-message-")]
        assert ids == [earlier.message_id, later.message_id]


class TestDispatchEdges:
    async def test_dispatch_outcomes_without_a_delivery(self, tmp_path: Path) -> None:
        """Unknown ids, delivered ids, a second dispatch of one id, and a stopped service."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        dispatcher = teams.coordination.dispatcher
        journal = teams.journals.get(root.session)
        assert await dispatcher.dispatch(journal, "team-message-none", worker.id) is False
        message = await queue_only(host, root, worker.id, "team-message-1")
        first = dispatcher.dispatch(journal, message.id, worker.id)
        assert dispatcher.dispatch(journal, message.id, worker.id) is first
        assert await first is True
        assert await dispatcher.dispatch(journal, message.id, worker.id) is True  # already delivered
        assert team_types(root.session.events).count(TEAM_MESSAGE_DELIVERED) == 1
        late = await queue_only(host, root, worker.id, "team-message-2")
        teams.lifecycle.close()
        assert await dispatcher.dispatch(journal, late.id, worker.id) is False
        gates.open("worker")
        await host.close()

    async def test_a_queued_record_that_cannot_be_flushed_is_not_delivered(self, tmp_path: Path) -> None:
        """No delivery before the queued record is durable: the dispatch reports failure, the mail stays queued."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        message = TeamMessageSnapshot(id="team-message-x", sender_id="lead", sender_name="lead", target_id=worker.id, content=(text_block("x"),))
        root.session.append(TEAM_MESSAGE_QUEUED, MessageQueuedRecord(version=VERSION, team_id="lead", message=message))
        faulty_log(root.session, fail_at=[1])
        assert await teams.coordination.dispatcher.dispatch(journal, message.id, worker.id) is False
        assert host.agents.get(worker.id).inbox.contains(message.id) is False
        gates.open("worker")
        await host.close()

    async def test_no_delivery_without_a_live_lead_or_with_a_failed_stream(self, tmp_path: Path) -> None:
        """A disposed Lead or a corrupt Team stream: nothing is delivered and recovery finds nothing to do."""
        host = await open_team(tmp_path)
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until_released(host, view.id)
        teams = teams_of(host)
        dispatcher = teams.coordination.dispatcher
        journal = teams.journals.get(root.session)
        message = await queue_only(host, root, view.id, "team-message-1")
        helper = host.start_agent(await host.create_session("helper", parent_session="lead"), name="helper")
        helper.session.append(EventType.SUBAGENT_DESCRIPTOR, {"version": 2, "mode": "continuable", "provider": "spawn"})
        assert await dispatcher.recover(helper) == 0  # a provider-owned child is no member
        await host.dispose_agent(root)
        assert await dispatcher.dispatch(journal, message.id, view.id) is False
        other = await lead(host, "other")
        await queue_only(host, other, view.id, "team-message-2")
        other.session.append("team/member", {"version": 2, "team_id": "other", "member": {"broken": True}})
        other_journal = teams.journals.get(other.session)
        assert await dispatcher.dispatch(other_journal, "team-message-2", view.id) is False
        assert await dispatcher.recover(other) == 0
        await host.close()


class TestObserver:
    async def test_only_undelivered_team_mail_of_a_live_lead_is_acknowledged(self, tmp_path: Path) -> None:
        """Foreign sources, unknown Teams, wrong targets and delivered mail schedule nothing."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        message = await queue_only(host, root, worker.id, "team-message-1")
        source = team_user_message("lead", message).source
        scratch = await host.create_session("scratch")
        observed = [
            user_message("plain"),
            user_message("x", source={"kind": "team-message", "team_id": 7}),
            user_message("x", source={**source, "team_id": "nobody"}),
            user_message("x", source={**source, "message_id": "team-message-unknown"}),
            user_message("x", source={**source, "message_id": 5}),
            {"id": "odd", "content": [], "source": "not an object"},
            team_user_message("lead", message),  # right Team and message, wrong target session
        ]
        for item in observed:
            scratch.append(EventType.USER_MESSAGE, item)
        await ready_work_ran()
        assert not journal.state.mail.is_delivered(message.id)
        worker.session.append(EventType.USER_MESSAGE, team_user_message("lead", message))
        await until(lambda: journal.state.mail.is_delivered(message.id), what="the delivery record")
        worker.session.append(EventType.USER_MESSAGE, team_user_message("lead", message))  # delivered: ignored
        teams.lifecycle.close()
        worker.session.append(EventType.USER_MESSAGE, team_user_message("lead", message))  # disposed: ignored
        assert team_types(root.session.events).count(TEAM_MESSAGE_DELIVERED) == 1
        gates.open("worker")
        await host.close()


class TestAcknowledgementPaths:
    async def test_a_lead_that_already_holds_its_message_is_not_steered_again(self, tmp_path: Path) -> None:
        """Mail to the Lead already pending in its inbox is only acknowledged: one copy."""
        gates = Gates()
        host = await open_team(tmp_path, {"lead": [{"text": "park", "tool_calls": [BLOCK]}]}, gates=gates)
        root = await lead(host)
        root.followup(user_message("go"))
        await gates.parked("lead")  # busy: a steered item waits in next-step, unclaimed
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        message = await queue_only(host, root, "lead", "team-message-l")
        root.steer(team_user_message("lead", message))
        assert await teams.coordination.dispatcher.dispatch(journal, message.id, "lead") is True
        inserted = [i for e in root.session.events if e.type == EventType.INBOX_SPLICED for i in e.value().get("inserted", [])]
        assert [i["id"] for i in inserted].count(message.id) == 1
        gates.open("lead")
        await host.close()

    async def test_a_target_on_disk_is_checked_from_its_stored_log(self, tmp_path: Path) -> None:
        """Acknowledging against a stored target: held -> ``delivered``; not held -> stays queued."""
        host = await open_team(tmp_path)
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until_released(host, view.id)
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        missing = await queue_only(host, root, view.id, "team-message-1")
        assert await teams.coordination.dispatcher.acknowledge(journal, missing) is False
        held = await queue_only(host, root, view.id, "team-message-2")
        session = await host.resume_session(view.id)
        session.append(EventType.USER_MESSAGE, team_user_message("lead", held))
        await host.release_session(session)
        assert await teams.coordination.dispatcher.acknowledge(journal, held) is True
        assert journal.state.mail.is_delivered(held.id) and not journal.state.mail.is_delivered(missing.id)
        await host.close()

    async def test_observed_acknowledgements_that_fail_or_come_too_late_are_contained(self, tmp_path: Path) -> None:
        """An unflushable acknowledgement is logged and retried later; one scheduled at disposal is dropped."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        journal = teams.journals.get(root.session)
        message = await queue_only(host, root, worker.id, "team-message-1")
        lead_fault = faulty_log(root.session)
        lead_fault.fail_when(lambda n: True)
        worker.session.append(EventType.USER_MESSAGE, team_user_message("lead", message))
        await until(lambda: lead_fault.writes, what="the delivery record's (failing) write")
        await ready_work_ran()
        assert lead_fault.writes >= 1 and journal.state.mail.is_delivered(message.id)  # visible, unconfirmed
        lead_fault.fail_when(None)
        late = await queue_only(host, root, worker.id, "team-message-2")
        worker.session.append(EventType.USER_MESSAGE, team_user_message("lead", late))
        teams.lifecycle.close()  # before the scheduled acknowledgement runs
        for _ in range(20):
            await asyncio.sleep(0)
        assert not journal.state.mail.is_delivered(late.id)
        gates.open("worker")
        await host.close()
