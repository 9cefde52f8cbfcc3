"""Service disposal with teammates: admission closed, admitted work settled (bounded), roster children drained (§4.4)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from dsh_team.api import TeamServiceAPI
from dsh_team.errors import TeamError
from dsh_team.core.records import TEAM_MEMBER, VERSION, MemberRecord
from dsh_team.core.snapshots import TeamMemberSnapshot
from host_spec.messages import text_block

from roster_kit import (
    BLOCK,
    faulty_log,
    Gates,
    OnSession,
    Provider,
    Stubborn,
    lead,
    member_phases,
    open_team,
    pending_ids,
    spawn,
    stored,
    stored_team,
    teams_of,
    until_released,
)
from kit_waits import until
from team_host import add_member

PARK = {"text": "park", "tool_calls": [BLOCK]}


def text(value: str) -> list[dict[str, Any]]:
    return [text_block(value)]


class TestDrain:
    async def test_unloading_drains_live_teammates_and_keeps_their_accepted_mail(self, tmp_path: Path) -> None:
        """Live teammates stop, waits end, a delivered-but-pending message stays durable (case 37)."""
        gates = Gates()
        host = await open_team(tmp_path, {"worker": [PARK]}, gates=gates)
        root = await lead(host)
        teams = teams_of(host)
        view = await spawn(host, root, "worker")
        await gates.parked("worker")
        sent = await teams.send_message(root, target="worker", content=text("keep me"))
        waiting = asyncio.ensure_future(teams.wait_for_change(root, 3_600_000))
        await asyncio.sleep(0)
        await host.plugins.unload("dsh-team")
        assert (await waiting).timed_out is False
        assert host.sessions.get(view.id) is None and host.find_service(TeamServiceAPI) is None
        await host.close()
        assert stored_team(tmp_path).mail.is_delivered(sent.message_id)
        assert sent.message_id in pending_ids(stored(tmp_path, view.id))  # a cold resume works it off

    async def test_only_rostered_children_are_drained_even_failed_ones(self, tmp_path: Path) -> None:
        """A failed member whose child is still live is drained; a non-Team child of the Lead is left alone (case 41)."""
        gates = Gates()
        host = await open_team(tmp_path, {"failed-one": [PARK], "helper": [PARK]}, gates=gates)
        root = await lead(host)
        failed_id = host.continuations.new_child_id()
        await add_member(host, root, failed_id, "failed-one", "provisioning")
        await host.continuations.start_continuable(
            child_id=failed_id, provider="spawn", label="f", prompt=text("x"), parent=root, name="failed-one"
        )
        snapshot = TeamMemberSnapshot(id=failed_id, name="failed-one", description="worker", provider="spawn", context="fresh", phase="failed", error="gave up")
        root.session.append(TEAM_MEMBER, MemberRecord(version=VERSION, team_id="lead", member=snapshot))
        helper_id = host.continuations.new_child_id()
        await host.continuations.start_continuable(child_id=helper_id, provider="spawn", label="helper", prompt=text("y"), parent=root)
        await gates.parked("failed-one")
        await gates.parked("helper")
        await teams_of(host).dispose()
        assert host.sessions.get(failed_id) is None
        assert host.sessions.get(helper_id) is not None and host.agents.get(helper_id).status == "running"
        gates.open("helper")
        await host.close()

    async def test_a_drain_that_never_settles_is_bounded(self, tmp_path: Path) -> None:
        """A teammate ignoring cancellation: disposal ends with TEAM_DISPOSAL_TIMEOUT (case 44)."""
        stubborn = Stubborn()
        host = await open_team(
            tmp_path, {"worker": [{"text": "busy", "tool_calls": [{"name": "stubborn", "arguments": {}}]}]},
            {"disposal_timeout_ms": 50}, plugins=[stubborn],
        )  # fmt: skip
        root = await lead(host)
        await spawn(host, root, "worker")
        await stubborn.entered.wait()
        with pytest.raises(BaseExceptionGroup) as caught:
            await teams_of(host).dispose()
        (timeout,) = caught.value.exceptions
        assert timeout.code == "TEAM_DISPOSAL_TIMEOUT" and "teammate drain" in timeout.message
        stubborn.gate.set()
        await host.close()


class TestInFlight:
    async def test_an_in_flight_spawn_is_cancelled_and_its_child_drained(self, tmp_path: Path) -> None:
        """During disposal waits return, new work is refused, the admitted spawn fails TEAM_DISPOSED (case 38)."""
        faults = OnSession(lambda s: faulty_log(s, hold=True) if s.header.parent_session else None)
        host = await open_team(tmp_path, plugins=[faults])
        root = await lead(host)
        teams = teams_of(host)
        creating = asyncio.ensure_future(spawn(host, root, "worker"))
        await until(lambda: faults.faults, what="the child's log to be opened")
        (fault,) = faults.faults.values()
        await fault.wait_entered()
        disposing = asyncio.ensure_future(teams.dispose())
        await asyncio.sleep(0)
        assert (await teams.wait_for_change(root, 10_000)).timed_out is False
        for attempt in (spawn(host, root, "other"), teams.send_message(root, target="lead", content=text("x"))):
            with pytest.raises(TeamError) as refused:
                await attempt
            assert refused.value.code == "TEAM_DISPOSED"
        fault.release()
        with pytest.raises(TeamError) as caught:
            await creating
        assert caught.value.code == "TEAM_DISPOSED"
        await disposing  # the service's own cancellation is not a failure
        (child_id,) = faults.faults
        assert host.sessions.get(child_id) is None
        assert member_phases(teams.journals.get(root.session).state) == {"worker": "failed"}
        await host.close()

    async def test_a_creation_ignoring_cancellation_bounds_disposal_and_admission_stays_closed(self, tmp_path: Path) -> None:
        """A stuck creation: TEAM_DISPOSAL_TIMEOUT; spawn, send and internal dispatch stay refused (case 45)."""
        faults = OnSession(lambda s: faulty_log(s, hold=True) if s.header.parent_session else None)
        host = await open_team(tmp_path, config={"disposal_timeout_ms": 50}, plugins=[faults])
        root = await lead(host)
        teams = teams_of(host)
        creating = asyncio.ensure_future(spawn(host, root, "worker"))
        await until(lambda: faults.faults, what="the child's log to be opened")
        (fault,) = faults.faults.values()
        await fault.wait_entered()
        with pytest.raises(BaseExceptionGroup) as caught:
            await teams.dispose()
        assert [e.code for e in caught.value.exceptions] == ["TEAM_DISPOSAL_TIMEOUT"]
        with pytest.raises(TeamError):
            await teams.send_message(root, target="lead", content=text("x"))
        journal = teams.journals.get(root.session)
        assert await teams.coordination.dispatcher.dispatch(journal, "team-message-x", "lead") is False
        fault.release()
        with pytest.raises(TeamError):
            await creating
        await host.close()

    async def test_an_admitted_cold_dispatch_is_aborted_and_reported_queued(self, tmp_path: Path) -> None:
        """Disposal during a send's queued flush: the delivery is not attempted, the send says ``queued`` (case 42)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        teams = teams_of(host)
        view = await spawn(host, root, "worker")
        await until_released(host, view.id)
        gate = faulty_log(root.session)
        gate.hold()
        sending = asyncio.ensure_future(teams.send_message(root, target="worker", content=text("x")))
        await gate.wait_entered()
        disposing = asyncio.ensure_future(teams.dispose())
        await asyncio.sleep(0)
        gate.release()
        assert (await sending).status == "queued"
        await disposing
        assert host.sessions.get(view.id) is None  # never cold-resumed
        await host.close()
        assert len(stored_team(tmp_path).mail.pending_for(view.id)) == 1  # durable, for the next start

    async def test_an_in_flight_creation_cleanup_failure_is_reported_by_disposal(self, tmp_path: Path) -> None:
        """The cancelled creator cannot record its failure: disposal reports that, not the cancellation (case 39)."""
        faults = OnSession(lambda s: faulty_log(s, hold=True) if s.header.parent_session else None)
        host = await open_team(tmp_path, plugins=[faults])
        root = await lead(host)
        teams = teams_of(host)
        lead_fault = faulty_log(root.session)
        creating = asyncio.ensure_future(spawn(host, root, "worker"))
        await until(lambda: faults.faults, what="the child's log to be opened")
        (fault,) = faults.faults.values()
        await fault.wait_entered()
        disposing = asyncio.ensure_future(teams.dispose())
        await asyncio.sleep(0)
        lead_fault.fail_when(lambda n: True)  # the ``failed`` record cannot be flushed
        fault.release()
        with pytest.raises(BaseExceptionGroup) as created:
            await creating
        cancelled, recording = created.value.exceptions
        assert cancelled.code == "TEAM_DISPOSED" and recording.code == "TEAM_PERSISTENCE_UNCONFIRMED"
        with pytest.raises(BaseExceptionGroup) as disposed:
            await disposing
        assert created.value in disposed.value.exceptions
        lead_fault.fail_when(None)
        await host.close()


class TestRecoveryScheduling:
    async def test_recovery_failures_are_contained_and_work_after_disposal_is_ignored(self, tmp_path: Path) -> None:
        """A failing reconciliation is logged, never raised; recovery scheduled after disposal does nothing (case 46)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        await add_member(host, root, "child-x", "ghost", "provisioning")
        teams = teams_of(host)
        coordination = teams.coordination
        faulty_log(root.session, fail_at=[1])  # the reconciliation's terminal record cannot be flushed
        await coordination.recover(root, frozenset({"child-x"}))  # logged, not raised
        assert member_phases(teams.journals.get(root.session).state) == {"ghost": "failed"}
        await add_member(host, root, "child-y", "late", "provisioning")
        teams.lifecycle.close()
        with capture_logs() as logs:
            coordination.agent_started(root)  # schedules recovery of "late" after disposal began
            await host.quiesce()
        assert [entry["event"] for entry in logs if entry["log_level"] in ("warning", "error")] == []
        assert member_phases(teams.journals.get(root.session).state) == {"ghost": "failed", "late": "provisioning"}
        await coordination.recover(root, frozenset({"child-x"}))  # already settled: nothing to do
        await host.close()

    async def test_loading_into_a_running_host_recovers_live_agents(self, tmp_path: Path) -> None:
        """The plugin loaded after agents started: their open records and mail are settled."""
        host = await open_team(tmp_path)
        root = await lead(host)
        await add_member(host, root, "child-x", "ghost", "provisioning")
        await host.plugins.unload("dsh-team")
        host.plugins.load("dsh-team", {})
        await host.quiesce()
        assert member_phases(teams_of(host).journals.get(root.session).state) == {"ghost": "failed"}
        await host.close()

    async def test_an_already_failed_record_is_left_as_is_by_a_failing_creator(self, tmp_path: Path) -> None:
        """Recovery recorded ``failed`` first and the creator fails too: nothing more is written."""
        host = await open_team(tmp_path)
        root = await lead(host)
        boom = RuntimeError("second failure")

        def failed_then_raise(parent: Any) -> None:
            (member,) = teams_of(host).journals.get(root.session).state.members.listed()
            snapshot = TeamMemberSnapshot(id=member.id, name="worker", description="worker worker", provider="bad", context="fresh", phase="failed", error="recovered")
            parent.session.append(TEAM_MEMBER, MemberRecord(version=VERSION, team_id="lead", member=snapshot))
            raise boom

        host.continuations.register_provider(Provider("bad", failed_then_raise))
        with pytest.raises(RuntimeError) as caught:
            await spawn(host, root, "worker", provider="bad")
        assert caught.value is boom
        (member,) = teams_of(host).journals.get(root.session).state.members.listed()
        assert member.error == "recovered"
        await host.close()
