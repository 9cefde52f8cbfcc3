"""Talking to any member as the user, and the Lead's notice of a teammate's failed turn.

Real host, real JSONL files, the scripted model; the only test-side part is a
model that fails a named agent's call (the host's ``MODEL_*`` seam).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_team.core.records import TEAM_MESSAGE_DELIVERED, TEAM_MESSAGE_QUEUED
from dsh_team.errors import TeamError
from dsh_team.mail.framing import NOTICE_SENDER, USER_SENDER, recorded_team_message
from dsh_team.mail.notices import failure_of, notice_text
from host_spec.errors import ModelError
from host_spec.events import EventType
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.messages import message_text
from host_spec.testing import FaultyStorage

from roster_kit import Gates, lead, of_type, parked_team, spawn, stored, stored_team, teams_of, until


def inserted(events: Any) -> list[dict[str, Any]]:
    return [item for splice in of_type(events, EventType.INBOX_SPLICED) for item in splice.get("inserted", [])]


class FailingModel(ScriptedModel):
    """The scripted model, except that a call whose conversation says ``FAIL:<code>`` raises that code.

    ``gate`` holds a failing call until it is set (set by default).
    """

    gate: asyncio.Event | None = None

    async def complete(self, request: Any) -> Any:
        for message in request.messages:
            text = message_text(list(message.get("content") or [])) if isinstance(message.get("content"), list) else ""
            if "FAIL:" in text and "Team notice" not in text:
                code = text.split("FAIL:", 1)[1].split()[0]
                if self.gate is not None:
                    await self.gate.wait()
                raise ModelError(f"the server answered 503 for {request.agent.name}", code=code)
        return await super().complete(request)


async def failing_team(tmp_path: Path, script: dict[str, Any], gate: asyncio.Event | None = None, **config: Any) -> Host:
    model = FailingModel.from_mapping(script)
    model.gate = gate
    host = await Host.open(tmp_path / "data", None, model, wrap_storage=FaultyStorage)
    host.plugins.load("dsh-team", config)
    return host


class TestSendFromUser:
    async def test_a_parked_teammate_gets_the_users_message_framed_as_the_user(self, tmp_path: Path) -> None:
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        sent = await teams_of(host).send_from_user(root, "worker", "stop and summarise")
        assert sent.status == "accepted"
        mine = [item for item in inserted(worker.session.events) if item["id"] == sent.message_id]
        assert len(mine) == 1
        assert message_text(mine[0]["content"]) == f"Message {sent.message_id} from the user:stop and summarise"
        assert mine[0]["source"]["kind"] == "user" and mine[0]["source"]["sender_id"] == USER_SENDER
        state = teams_of(host).journals.get(root.session).state
        assert state.mail.is_delivered(sent.message_id)
        queued = of_type(root.session.events, TEAM_MESSAGE_QUEUED)[-1]
        assert queued["message"]["sender_id"] == "user" and queued["message"]["sender_name"] == "user"
        gates.open("worker")
        await host.close()

    async def test_the_user_may_write_to_the_lead(self, tmp_path: Path) -> None:
        host, root, gates, _ = await parked_team(tmp_path, "worker")
        sent = await teams_of(host).send_from_user(root, " lead ", "how far are we?")
        mine = [item for item in inserted(root.session.events) if item["id"] == sent.message_id]
        assert len(mine) == 1 and mine[0]["source"]["kind"] == "user"
        gates.open("worker")
        await host.close()

    async def test_only_the_lead_speaks_for_the_user_and_bad_text_is_refused(self, tmp_path: Path) -> None:
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        service = teams_of(host)
        before = len(root.session.events)
        with pytest.raises(TeamError) as not_lead:
            await service.send_from_user(worker, "lead", "hi")
        assert not_lead.value.code == "TEAM_LEAD_REQUIRED"
        for bad in ("", "   ", 7, None):
            with pytest.raises(TeamError) as invalid:
                await service.send_from_user(root, "worker", bad)
            assert invalid.value.code == "TEAM_INVALID_ARGUMENT"
        with pytest.raises(TeamError) as unknown:
            await service.send_from_user(root, "nobody", "hi")
        assert unknown.value.code == "TEAM_MEMBER_NOT_FOUND"
        assert len(root.session.events) == before  # nothing written
        gates.open("worker")
        await host.close()

    async def test_a_sleeping_teammate_is_resumed_to_read_it_exactly_once(self, tmp_path: Path) -> None:
        script = {"worker": [{"text": "started"}, {"when": "from the user", "text": "on it"}]}
        host = await failing_team(tmp_path, script)
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until(lambda: host.agents.get(view.id) is None, what="the worker asleep")
        sent = await teams_of(host).send_from_user(root, "worker", "please also check the docs")
        await until(lambda: any(e.type == EventType.ASSISTANT_MESSAGE and b"on it" in bytes(e.data)
                                for e in stored(tmp_path, view.id)), what="the worker's answer")
        await host.close()
        events = stored(tmp_path, view.id)
        recorded = [e for e in events if e.type == EventType.USER_MESSAGE and recorded_team_message(e)]
        assert [recorded_team_message(e) for e in recorded] == [("lead", sent.message_id)]
        assert sent.message_id not in stored_team(tmp_path).mail.messages or stored_team(tmp_path).mail.is_delivered(
            sent.message_id)


class TestFailureNotices:
    def test_failure_of_reads_only_model_errors(self) -> None:
        assert failure_of({"kind": "error", "error": {"code": "MODEL_TIMEOUT", "message": "slow"}}) == (
            "MODEL_TIMEOUT", "slow")
        assert failure_of({"kind": "error", "error": {"code": "MODEL_ERROR"}}) == ("MODEL_ERROR", "")
        for other in (
            {"kind": "completed"}, {"kind": "error", "error": {"code": "TEAM_BUDGET_EXCEEDED", "message": "x"}},
            {"kind": "error", "error": "boom"}, {"kind": "error"}, None, {"kind": "error", "error": {"code": 3}},
        ):
            assert failure_of(other) is None

    def test_a_long_text_is_cut(self) -> None:
        text = notice_text("bob", 2, "MODEL_ERROR", "x" * 5000)
        assert text.startswith("bob's turn 2 ended on MODEL_ERROR: ") and len(text) < 2200 and "x..." in text

    async def test_a_teammates_model_error_tells_the_lead_once_and_wakes_its_wait(self, tmp_path: Path) -> None:
        script = {"worker": [{"text": "started"}]}
        host = await failing_team(tmp_path, script)
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until(lambda: host.agents.get(view.id) is None, what="the worker asleep")
        service = teams_of(host)
        await service.send_message(root, target="worker", content=[{"type": "text", "text": "FAIL:MODEL_TIMEOUT now"}])
        position = service.position(root)
        # The failed turn leaves its message unread: the Team is not quiet, only the notice ends this wait.
        result = await asyncio.wait_for(service.wait_for_change(root, 60_000, since=position), 30)
        assert not result.timed_out and result.position > position and result.reason is None
        assert result.delta is not None
        await until(lambda: any(item["source"].get("sender_id") == NOTICE_SENDER for item in inserted(root.session.events)), what="the notice")
        notices = [item for item in inserted(root.session.events) if item["source"].get("sender_id") == NOTICE_SENDER]
        assert len(notices) == 1
        text = message_text(notices[0]["content"])
        assert text.startswith(f"Team notice {notices[0]['id']}:worker's turn 2 ended on MODEL_TIMEOUT")
        assert "the server answered 503 for worker" in text
        await host.close()
        queued = [q for q in of_type(stored(tmp_path, "lead"), TEAM_MESSAGE_QUEUED) if q["message"]["sender_id"] == "team"]
        assert len(queued) == 1 and queued[0]["message"]["target_id"] == "lead"
        delivered = {d["message_id"] for d in of_type(stored(tmp_path, "lead"), TEAM_MESSAGE_DELIVERED)}
        assert queued[0]["message"]["id"] in delivered

    async def test_the_leads_own_failure_and_a_completed_turn_tell_nobody(self, tmp_path: Path) -> None:
        host = await failing_team(tmp_path, {"worker": [{"text": "started"}, {"text": "done"}]})
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until(lambda: host.agents.get(view.id) is None, what="the worker asleep")
        from host_spec.messages import user_message

        root.steer(user_message("FAIL:MODEL_ERROR for the lead"))
        await until(lambda: any(e.type == EventType.TURN_END and b"MODEL_ERROR" in bytes(e.data)
                                for e in root.session.events), what="the Lead's failed turn")
        await host.close()
        queued = of_type(stored(tmp_path, "lead"), TEAM_MESSAGE_QUEUED)
        assert [q for q in queued if q["message"]["sender_id"] == "team"] == []

    async def test_a_notice_whose_flush_fails_is_logged_not_raised(self, tmp_path: Path) -> None:
        import structlog

        from kit_gates import faulty_log

        gate = asyncio.Event()
        host = await failing_team(tmp_path, {"worker": [{"text": "started"}]}, gate)
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until(lambda: host.agents.get(view.id) is None, what="the worker asleep")
        service = teams_of(host)
        with structlog.testing.capture_logs() as logs:
            await service.send_message(root, target="worker", content=[{"type": "text", "text": "FAIL:MODEL_ERROR"}])
            await until(lambda: bool(service.journals.get(root.session).state.mail.is_delivered(
                of_type(root.session.events, TEAM_MESSAGE_QUEUED)[-1]["message"]["id"])), what="the delivery")
            await host.sessions.flush(root.session)
            faulty_log(root.session, fail_from=1)  # the notice's flush fails
            gate.set()  # only now does the worker's model call fail
            await until(lambda: any(entry["event"] == "team.notice_failed" for entry in logs), what="the warning")
        failed = [entry for entry in logs if entry["event"] == "team.notice_failed"]
        assert failed[0]["member"] == view.id and "unconfirmed" in failed[0]["error"]
