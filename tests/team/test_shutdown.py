"""Graceful shutdown: request, approve (released once idle), decline, the deadline, and a crash in between.

Real host, real JSONL files, the scripted model; the SIGKILL case runs the real
``dsh`` through :mod:`crash_driver` and ``dsh resume``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_team.core.records import TEAM_MESSAGE_QUEUED
from dsh_team.errors import TeamError
from dsh_team.roster.shutdown import TEAM_SHUTDOWN
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text, text_block
from host_spec.records import AbortSignal

from roster_kit import lead, of_type, open_team, spawn, stored, teams_of, until
from test_team_crash import DRIVER, DSH

APPROVE = {"when": "Shutdown request", "text": "wrapping up", "tool_calls": [
    {"name": "send_message", "arguments": {"target": "lead", "message": "all committed", "shutdown": "approve"}}]}
DECLINE = {"when": "Shutdown request", "text": "not yet", "tool_calls": [
    {"name": "send_message", "arguments": {"target": "lead", "message": "tests still running", "shutdown": "decline"}}]}


async def tools_team(
    tmp_path: Path, worker: list[Any], lead_steps: list[Any] | None = None, **config: Any
) -> tuple[Any, Any, str]:
    script = {"worker": [{"text": "started"}, *worker], "lead": lead_steps or []}
    host = await open_team(tmp_path, script, config)
    host.plugins.load("dsh-team-tools")
    root = await lead(host)
    view = await spawn(host, root, "worker")
    await until(lambda: host.agents.get(view.id) is None, what="the worker asleep")
    return host, root, view.id


def phases(events: Any, member_id: str) -> list[str]:
    return [r["phase"] for r in of_type(events, TEAM_SHUTDOWN) if r["member_id"] == member_id]


def lead_texts(events: Any) -> list[str]:
    return [message_text(q["message"]["content"]) for q in of_type(events, TEAM_MESSAGE_QUEUED)
            if q["message"]["target_id"] == q["team_id"]]


class TestShutdown:
    async def test_the_lead_asks_through_send_message(self, tmp_path: Path) -> None:
        ask = {"when": "ask it", "text": "asking", "tool_calls": [{"name": "send_message", "arguments": {
            "target": "worker", "message": "release is out", "shutdown": "request"}}]}
        host, root, worker_id = await tools_team(tmp_path, [APPROVE, {"text": "bye"}], [ask, {"text": "asked"}])
        from host_spec.messages import user_message

        root.steer(user_message("ask it"))
        await until(lambda: "released" in phases(root.session.events, worker_id), what="the release")
        requested = of_type(root.session.events, TEAM_SHUTDOWN)[0]
        assert requested["reason"] == "release is out" and requested["deadline"] > 0
        delivered = [m for m in of_type(stored(tmp_path, worker_id), "user/message")
                     if "Shutdown request from the Lead: release is out" in json.dumps(m)]
        assert len(delivered) == 1
        await host.close()

    async def test_an_approved_member_is_released_for_good(self, tmp_path: Path) -> None:
        host, root, worker_id = await tools_team(tmp_path, [APPROVE, {"text": "bye"}, {"text": "never again"}])
        service = teams_of(host)
        sent = await service.request_shutdown(root, "worker", "the release is out")
        assert sent.message_id.startswith("team-message-")
        await until(lambda: "released" in phases(root.session.events, worker_id), what="the release")
        assert phases(root.session.events, worker_id) == ["requested", "approved", "released"]
        journal = service.journals.get(root.session)
        await service.coordination.shutdowns.end(journal, worker_id, "stopped", "late timer")  # ended already
        assert phases(root.session.events, worker_id) == ["requested", "approved", "released"]
        assert any("Shutdown approved by worker: all committed" in t for t in lead_texts(root.session.events))
        await until(lambda: host.agents.get(worker_id) is None, what="the session released after the record")
        with pytest.raises(TeamError) as gone:
            await service.send_message(root, target="worker", content=[text_block("one more thing")])
        assert gone.value.code == "TEAM_MEMBER_NOT_FOUND" and "shut down" in gone.value.message
        with pytest.raises(TeamError) as again:
            await service.request_shutdown(root, "worker", "again")
        assert again.value.code == "TEAM_MEMBER_NOT_FOUND"
        assert [row.name for row in service.list_members(root)] == ["lead", "worker"]  # the name stays reserved
        # Who shut down is visible: list_agents says "shut down", not a bare "inactive".
        listed = await host.tools.execute(root, "c-list", "list_agents", "{}", AbortSignal())
        assert listed.error is None, listed.error
        members = json.loads(message_text(listed.content))["members"]
        assert {m["target"]: m["status"] for m in members}["worker"] == "shut down"
        await host.close()
        answers = [json.dumps(e) for e in of_type(stored(tmp_path, worker_id), "assistant/message")]
        assert any("bye" in a for a in answers)  # it finished the turn it approved in
        assert not any("never again" in a for a in answers)  # and was never woken again

    async def test_a_decline_keeps_the_member_and_a_new_request_may_follow(self, tmp_path: Path) -> None:
        host, root, worker_id = await tools_team(tmp_path, [DECLINE, {"text": "ok"}])
        service = teams_of(host)
        await service.request_shutdown(root, "worker", "wrap up")
        await until(lambda: "declined" in phases(root.session.events, worker_id), what="the decline")
        await host.quiesce()
        assert any("Shutdown declined by worker: tests still running" in t for t in lead_texts(root.session.events))
        await service.send_message(root, target="worker", content=[text_block("fine, keep going")])
        await service.request_shutdown(root, "worker", "now please")
        assert phases(root.session.events, worker_id)[-1] == "requested"
        await host.close()

    async def test_no_answer_before_the_deadline_stops_the_member_and_tells_the_lead(self, tmp_path: Path) -> None:
        host, root, worker_id = await tools_team(tmp_path, [{"when": "NEVER", "text": "x"}], shutdown_timeout_ms=300)
        await teams_of(host).request_shutdown(root, "worker", "wrap up")
        await until(lambda: "stopped" in phases(root.session.events, worker_id), what="the stop")
        await until(lambda: any("did not answer the shutdown request" in t for t in lead_texts(root.session.events)),
                    what="the Lead's notice")
        await until(lambda: host.agents.get(worker_id) is None, what="the session released")
        await host.close()

    async def test_refusals(self, tmp_path: Path) -> None:
        ask_self = {"when": "Shutdown request", "text": "me too", "tool_calls": [{"name": "send_message", "arguments": {
            "target": "worker", "message": "x", "shutdown": "request"}}]}
        host, root, worker_id = await tools_team(tmp_path, [ask_self, {"text": "waiting"}], shutdown_timeout_ms=300)
        service = teams_of(host)
        for target, code in (("lead", "TEAM_INVALID_TARGET"), ("nobody", "TEAM_MEMBER_NOT_FOUND")):
            with pytest.raises(TeamError) as refused:
                await service.request_shutdown(root, target, "x")
            assert refused.value.code == code
        with pytest.raises(TeamError) as blank:
            await service.request_shutdown(root, "worker", " ")
        assert blank.value.code == "TEAM_INVALID_ARGUMENT"
        with pytest.raises(TeamError) as lead_answers:
            await service.answer_shutdown(root, True, "yes")
        assert lead_answers.value.code == "TEAM_NO_SHUTDOWN_REQUEST"
        await service.request_shutdown(root, "worker", "wrap up")
        with pytest.raises(TeamError) as twice:
            await service.request_shutdown(root, "worker", "wrap up")
        assert twice.value.code == "TEAM_SHUTDOWN_PENDING"
        await host.quiesce()
        await host.close()
        results = [r for r in of_type(stored(tmp_path, worker_id), "tool/result") if r.get("is_error")]
        assert results and results[0]["error"]["code"] == "TEAM_LEAD_REQUIRED"  # a teammate cannot ask


class TestRecovery:
    async def test_a_restart_stops_an_expired_request_and_releases_an_approved_member(self, tmp_path: Path) -> None:
        from dsh_team.log.journal import Append
        from dsh_team.roster.shutdown import ShutdownRecord

        from roster_kit import resume_lead

        host = await open_team(tmp_path, {n: [{"text": n}] for n in "abcd"}, {"shutdown_timeout_ms": 1})
        root = await lead(host)
        ids = {name: (await spawn(host, root, name)).id for name in "abcd"}
        await until(lambda: all(host.agents.get(i) is None for i in ids.values()), what="both asleep")
        journal = teams_of(host).journals.get(root.session)
        for member, phase, deadline in (("a", "requested", 1), ("b", "requested", 1), ("b", "approved", None),
                                        ("c", "requested", 1), ("c", "declined", None),
                                        ("d", "requested", 1), ("d", "stopped", None)):
            record = ShutdownRecord(version=1, team_id="lead", member_id=ids[member], phase=phase, deadline=deadline)
            await journal.transact(lambda state, r=record: Append(TEAM_SHUTDOWN, r), what="a shutdown record")
        # mail queued to d before it was stopped, never delivered: it must never wake d
        from dsh_team.core.records import VERSION, MessageQueuedRecord
        from dsh_team.core.snapshots import TeamMessageSnapshot

        message = TeamMessageSnapshot(id="team-message-late", sender_id="lead", sender_name="lead", target_id=ids["d"],
                                      content=(text_block("late"),))
        await journal.transact(lambda state: Append(TEAM_MESSAGE_QUEUED, MessageQueuedRecord(
            version=VERSION, team_id="lead", message=message, index=state.mail.next_index)), what="late mail")
        await host.close()
        host = await open_team(tmp_path, {n: [] for n in "abcd"}, {"shutdown_timeout_ms": 1})
        root = await resume_lead(host)
        await until(lambda: len(of_type(root.session.events, TEAM_SHUTDOWN)) == 9, what="both ended")
        await host.quiesce()
        assert host.agents.get(ids["d"]) is None and teams_of(host).journals.get(root.session).state.mail.pending_count(
            ids["d"]) == 1  # kept queued, never delivered: d is gone
        assert phases(root.session.events, ids["c"]) == ["requested", "declined"]  # a decline is left alone
        assert phases(root.session.events, ids["a"])[-1] == "stopped"
        assert phases(root.session.events, ids["b"])[-1] == "released"
        await until(lambda: any("a did not answer" in t for t in lead_texts(root.session.events)), what="the notice")
        statuses = {row.name: row.status for row in teams_of(host).list_members(root) if row.name != "lead"}
        assert statuses == {"a": "shut down", "b": "shut down", "c": "inactive", "d": "shut down"}
        book = teams_of(host).coordination.shutdowns.book
        book.forget(root.session)
        book.forget(root.session)
        await host.close()
        # Offline, from the log alone: dsh team show (text and --json) and the web panel's document.
        from dsh_team.web.document import PanelFold, document
        from host_spec.host.cli.main import main

        events = JsonlStore(tmp_path / "data").read("lead")[1]
        fold = PanelFold("lead")
        fold.advance(events, len(events))
        panel = {m["name"]: m["status"] for m in document(fold, log_length=len(events))["members"]}
        assert {n: panel[n] for n in "abcd"} == statuses
        live = {m["name"]: m["status"] for m in document(fold, log_length=len(events), live=lambda _: None)["members"]}
        assert {n: live[n] for n in "abcd"} == statuses
        shown = subprocess.run([*DSH, "team", "show", "--json", "--data-dir", str(tmp_path / "data")],
                               capture_output=True, text=True, timeout=120)
        assert {m["name"]: m["status"] for m in json.loads(shown.stdout)["members"] if m["name"] != "lead"} == statuses
        text = subprocess.run([*DSH, "team", "show", "--data-dir", str(tmp_path / "data")],
                              capture_output=True, text=True, timeout=120).stdout
        assert re.search(r"^\s+d\s.*shut down", text, re.M) and re.search(r"^\s+c\s.*inactive", text, re.M), text

    async def test_a_failed_stop_is_logged(self, tmp_path: Path) -> None:
        import structlog

        from kit_gates import faulty_log

        host, root, worker_id = await tools_team(tmp_path, [{"when": "NEVER", "text": "x"}], shutdown_timeout_ms=200)
        with structlog.testing.capture_logs() as logs:
            await teams_of(host).request_shutdown(root, "worker", "wrap up")
            await host.sessions.flush(root.session)
            faulty_log(root.session, fail_from=1)  # the stop record's flush fails
            await until(lambda: any(e["event"] == "team.shutdown_failed" for e in logs), what="the warning")


SCRIPT = {
    "lead": [
        {"text": "spawning", "tool_calls": [
            {"name": "spawn_teammate", "arguments": {"name": "worker", "description": "worker", "prompt": "start"}}]},
        {"text": "asking", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "worker", "message": "wrap up", "shutdown": "request"}}]},
        {"when": "did not answer", "text": "noted"},
    ],
    "worker": [{"text": "started"}, {"when": "NEVER", "text": "x"}],
}  # fmt: skip


@pytest.mark.slow
def test_a_request_pending_at_a_sigkill_is_timed_from_its_recorded_deadline(tmp_path: Path) -> None:
    data = tmp_path / "data"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    profile = tmp_path / "shutdown.toml"
    profile.write_text('extends = "agent-teams"\n\n[plugins.dsh-team]\nshutdown_timeout_ms = 1500\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, str(DRIVER), str(data), str(script), "after-shutdown-requested", "go",
                             str(profile)], env=env, capture_output=True, timeout=120)  # fmt: skip
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    store = JsonlStore(data)
    lead_events = store.read("session-1")[1]
    requested = of_type(lead_events, TEAM_SHUTDOWN)
    assert [r["phase"] for r in requested] == ["requested"]
    member_id = requested[0]["member_id"]
    while time.time() * 1000 < requested[0]["deadline"] + 50:
        time.sleep(0.1)  # the deadline passes while nothing runs
    resumed = subprocess.run([*DSH, "resume", "--profile", str(profile), "--model", f"scripted:{script}",
                              "--data-dir", str(data)], env=env, capture_output=True, timeout=120)  # fmt: skip
    assert resumed.returncode in (0, 1) and not re.findall(rb"^dsh: [A-Z_]+: .*$", resumed.stderr, re.M), \
        resumed.stderr.decode()[-2000:]
    lead_events = store.read("session-1")[1]
    assert phases(lead_events, member_id) == ["requested", "stopped"]
    notices = [t for t in lead_texts(lead_events) if "did not answer the shutdown request" in t]
    assert len(notices) == 1
    assert any("noted" in json.dumps(e) for e in of_type(lead_events, "assistant/message"))


class TestDeadlineKeepsTheRunUp:
    async def test_a_quiet_team_with_an_open_request_quiesces_only_after_the_deadline(self, tmp_path: Path) -> None:
        # The run's quiescence (what `dsh run` waits for) must include the open request's deadline:
        # a quiet Team used to quiesce at once, so the deadline was only enforced by a later resume.
        host, root, worker_id = await tools_team(tmp_path, [{"when": "NEVER", "text": "x"}], shutdown_timeout_ms=300)
        await teams_of(host).request_shutdown(root, "worker", "wrap up")
        await host.quiesce()
        assert phases(root.session.events, worker_id) == ["requested", "stopped"]
        assert any("did not answer the shutdown request" in t for t in lead_texts(root.session.events))
        await host.close()

    async def test_an_answer_ends_the_wait_before_the_deadline(self, tmp_path: Path) -> None:
        host, root, worker_id = await tools_team(tmp_path, [APPROVE, {"text": "bye"}], shutdown_timeout_ms=600_000)
        await teams_of(host).request_shutdown(root, "worker", "wrap up")
        await host.quiesce()  # would wait out the 10-minute deadline (and time the test out) if not cancelled
        assert phases(root.session.events, worker_id) == ["requested", "approved", "released"]
        await host.close()
