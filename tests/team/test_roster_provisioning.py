"""The provisioning state machine: durability order, durable failures, and every settlement race (§5.3)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_team.errors import TeamError
from dsh_team.core.records import TEAM_MEMBER, VERSION, MemberRecord
from dsh_team.core.snapshots import TeamMemberSnapshot
from host_spec.errors import SubagentError
from host_spec.events import EventType
from host_spec.messages import user_message
from host_spec.records import AbortSignal, CancelCause

from roster_kit import (
    BLOCK,
    AfterPrompt,
    faulty_log,
    Flushes,
    Gates,
    OnSession,
    Provider,
    children,
    lead,
    member_phases,
    open_team,
    pending_ids,
    spawn,
    stored,
    stored_team,
    team_types,
    teams_of,
)
from kit_waits import until


def terminal(root: Any, member_id: str, name: str, phase: str, provider: str, error: str | None = None) -> MemberRecord:
    """A terminal roster record as recovery would write it (the race partner of a creator)."""
    snapshot = TeamMemberSnapshot(
        id=member_id, name=name, description=f"{name} worker", provider=provider, context="fresh", phase=phase, error=error
    )
    return MemberRecord(version=VERSION, team_id=root.id, member=snapshot)


def only_member(host: Any, root: Any) -> TeamMemberSnapshot:
    (member,) = teams_of(host).journals.get(root.session).state.members.listed()
    return member


class TestDurabilityOrder:
    async def test_the_child_prompt_is_durable_before_the_lead_commits_active(self, tmp_path: Path) -> None:
        """Lead ``provisioning`` flush, then the child's prompt flush, then the Lead ``active`` flush (case 5)."""
        flushes = Flushes()
        host = await open_team(tmp_path, flushes=flushes)
        root = await lead(host)
        flushes.clear()
        view = await spawn(host, root, "worker")
        events = root.session.events
        provisioning, active = (e.seq for e in events if e.type == TEAM_MEMBER)
        commits = flushes.commits
        first_lead = next(i for i, (sid, seq) in enumerate(commits) if sid == "lead" and seq >= provisioning)
        first_child = next(i for i, (sid, _) in enumerate(commits) if sid == view.id)
        lead_active = next(i for i, (sid, seq) in enumerate(commits) if sid == "lead" and seq >= active)
        assert first_lead < first_child < lead_active
        assert member_phases(stored_team(tmp_path)) == {"worker": "active"}
        assert view.status in ("running", "inactive") and view.diagnostics == ()
        await host.close()

    async def test_an_unconfirmed_provisioning_record_never_starts_the_child(self, tmp_path: Path) -> None:
        """A failed provisioning flush: no child is started and the record is settled ``failed``."""
        host = await open_team(tmp_path)
        root = await lead(host)
        faulty_log(root.session).fail_next()
        with pytest.raises(TeamError) as caught:
            await spawn(host, root, "worker")
        assert caught.value.code == "TEAM_PERSISTENCE_UNCONFIRMED"
        assert children(host) == [] and not host.store.list_ids()[1:]
        member = stored_team(tmp_path).members.by_name("worker")
        assert member is not None and member.phase == "failed" and "unconfirmed" in (member.error or "")
        await host.close()


class TestDurableFailure:
    async def test_a_missing_provider_is_recorded_failed_and_keeps_its_name_and_slot(self, tmp_path: Path) -> None:
        """The provider error propagates; the name stays taken and counts against the limit (case 8)."""
        host = await open_team(tmp_path, config={"max_members": 1})
        root = await lead(host)
        with pytest.raises(SubagentError) as caught:
            await spawn(host, root, "ghost", provider="missing")
        assert caught.value.code == "NO_PROVIDER"
        row = teams_of(host).list_members(root)[1]
        assert (row.name, row.status, row.provider, row.diagnostics) == ("ghost", "failed", "missing", (caught.value.message,))
        for name, code in (("ghost", "TEAM_MEMBER_NAME_TAKEN"), ("other", "TEAM_MEMBER_LIMIT")):
            with pytest.raises(TeamError) as refused:
                await spawn(host, root, name)
            assert refused.value.code == code
        await host.close()
        assert member_phases(stored_team(tmp_path)) == {"ghost": "failed"}

    async def test_a_provider_exception_is_re_raised_unchanged_and_recorded(self, tmp_path: Path) -> None:
        """The original exception object propagates; its message is the diagnostic; nobody can message it."""
        boom = RuntimeError("provider exploded")

        def explode(parent: Any) -> None:
            raise boom

        host = await open_team(tmp_path)
        host.continuations.register_provider(Provider("bad", explode))
        root = await lead(host)
        with pytest.raises(RuntimeError) as caught:
            await spawn(host, root, "ghost", provider="bad")
        assert caught.value is boom
        assert teams_of(host).list_members(root)[1].diagnostics == ("provider exploded",)
        with pytest.raises(TeamError) as refused:
            await teams_of(host).send_message(root, target="ghost", content=[{"type": "text", "text": "hi"}])
        assert refused.value.code == "TEAM_MEMBER_NOT_FOUND"
        await host.close()

    async def test_a_checkpoint_failure_drains_the_accepted_child(self, tmp_path: Path) -> None:
        """The child accepted the prompt but the checkpoint flush failed: failed, child gone (case 7)."""
        faults = OnSession(lambda s: faulty_log(s, fail_from=2) if s.header.parent_session else None)
        host = await open_team(tmp_path, plugins=[faults, AfterPrompt()])
        root = await lead(host)

        def heal_child(write: int) -> None:  # the Lead records ``failed``: the child's disk recovers
            for fault in faults.faults.values():
                fault.fail_when(None)

        faulty_log(root.session, on_write=lambda n: n == 2 and heal_child(n))
        with pytest.raises(OSError) as caught:
            await spawn(host, root, "worker")
        member = only_member(host, root)
        assert member.phase == "failed" and member.error == str(caught.value)
        assert host.sessions.get(member.id) is None and host.agents.get(member.id) is None
        await host.close()

    async def test_an_abort_during_creation_fails_the_member_and_drains_the_child(self, tmp_path: Path) -> None:
        """An abort while the prompt is being accepted: the reason is raised, ``failed`` recorded, child drained."""
        faults = OnSession(lambda s: faulty_log(s, hold=True) if s.header.parent_session else None)
        host = await open_team(tmp_path, plugins=[faults])
        root = await lead(host)
        signal = AbortSignal()
        creating = asyncio.ensure_future(spawn(host, root, "worker", signal=signal))
        await until(lambda: faults.faults, what="the child's log to be opened")
        (fault,) = faults.faults.values()
        await fault.wait_entered()
        signal.abort(CancelCause("user"))
        fault.release()
        with pytest.raises(TeamError) as caught:
            await creating
        assert caught.value.code == "TEAM_DISPOSED" and "teammate creation aborted" in caught.value.message
        member = only_member(host, root)
        assert member.phase == "failed" and "CancelCause" in (member.error or "")
        assert host.sessions.get(member.id) is None
        assert pending_ids(stored(tmp_path, member.id)) == []  # the drained child's prompt was discarded
        await host.close()

    @pytest.mark.parametrize("reason", [ValueError("stop now"), "plain string"])
    async def test_a_pre_aborted_signal_writes_nothing(self, tmp_path: Path, reason: Any) -> None:
        """An exception reason is raised as is; any other reason is TEAM_DISPOSED (case 13)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        signal = AbortSignal()
        signal.abort(reason)
        with pytest.raises(BaseException) as caught:
            await spawn(host, root, "worker", signal=signal)
        if isinstance(reason, BaseException):
            assert caught.value is reason
        else:
            assert getattr(caught.value, "code", None) == "TEAM_DISPOSED"
        assert team_types(root.session.events) == [] and children(host) == []
        await host.close()


class TestSettlementRaces:
    async def test_recovery_settling_active_first_turns_a_creator_failure_into_a_conflict(self, tmp_path: Path) -> None:
        """A failure after ``active`` was reconciled: both errors are reported and ``active`` stays (case 9)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        boom = RuntimeError("late failure")

        def reconciled_then_fail(parent: Any) -> None:
            member = only_member(host, root)
            parent.session.append(TEAM_MEMBER, terminal(parent, member.id, "worker", "active", "racy"))
            raise boom

        host.continuations.register_provider(Provider("racy", reconciled_then_fail))
        with pytest.raises(BaseExceptionGroup) as caught:
            await spawn(host, root, "worker", provider="racy")
        original, conflict = caught.value.exceptions
        assert original is boom and conflict.code == "TEAM_PROVISIONING_CONFLICT"
        assert "became active while its creator reported failure" in conflict.message
        assert only_member(host, root).phase == "active"
        await host.close()

    async def test_recovery_settling_failed_first_makes_the_creator_drain_its_child(self, tmp_path: Path) -> None:
        """Reconciled ``failed`` during the start: the creator drains the child and reports the conflict (case 10)."""
        host = await open_team(tmp_path)
        root = await lead(host)

        def reconciled_failed(parent: Any) -> None:
            member = only_member(host, root)
            parent.session.append(TEAM_MEMBER, terminal(parent, member.id, "worker", "failed", "racy", "recovered"))

        host.continuations.register_provider(Provider("racy", reconciled_failed))
        with pytest.raises(TeamError) as caught:
            await spawn(host, root, "worker", provider="racy")
        assert caught.value.code == "TEAM_PROVISIONING_CONFLICT"
        assert "was reconciled as failed while creation was in progress" in caught.value.message
        member = only_member(host, root)
        assert (member.phase, member.error) == ("failed", "recovered")
        assert host.sessions.get(member.id) is None
        await host.close()

    async def test_a_reconciled_active_edge_is_kept_by_a_succeeding_creator(self, tmp_path: Path) -> None:
        """Recovery wrote ``active`` first: the creator returns the member and writes no second terminal record."""
        host = await open_team(tmp_path)
        root = await lead(host)

        def reconciled_active(parent: Any) -> None:
            member = only_member(host, root)
            parent.session.append(TEAM_MEMBER, terminal(parent, member.id, "worker", "active", "racy"))

        host.continuations.register_provider(Provider("racy", reconciled_active))
        view = await spawn(host, root, "worker", provider="racy")
        assert view.name == "worker" and team_types(root.session.events).count(TEAM_MEMBER) == 2
        await host.close()

    async def test_a_conflict_cleanup_failure_is_reported_with_the_conflict(self, tmp_path: Path) -> None:
        """Reconciled ``failed`` and the child cannot be released: conflict and teardown failure together."""
        gates = Gates()
        faults = OnSession(lambda s: faulty_log(s) if s.header.parent_session else None)
        host = await open_team(tmp_path, {"worker": [{"text": "park", "tool_calls": [BLOCK]}]}, gates=gates, plugins=[faults])
        root = await lead(host)
        lead_gate = faulty_log(root.session)

        def reconciled_failed(parent: Any) -> None:
            member = only_member(host, root)
            parent.session.append(TEAM_MEMBER, terminal(parent, member.id, "worker", "failed", "racy", "recovered"))
            lead_gate.hold()  # the creator's terminal-edge flush waits here

        host.continuations.register_provider(Provider("racy", reconciled_failed))
        creating = asyncio.ensure_future(spawn(host, root, "worker", provider="racy"))
        await gates.parked("worker")
        await lead_gate.wait_entered()
        (child_fault,) = faults.faults.values()
        child_fault.fail_when(lambda n: True)  # the drained child's final flushes fail
        lead_gate.release()
        with pytest.raises(BaseExceptionGroup) as caught:
            await creating
        conflict, cleanup = caught.value.exceptions
        assert conflict.code == "TEAM_PROVISIONING_CONFLICT" and cleanup.code == "ACTIVATION_TEARDOWN_FAILED"
        child_fault.fail_when(None)
        await host.close()

    async def test_a_failure_that_cannot_be_recorded_is_reported_with_the_original(self, tmp_path: Path) -> None:
        """The start failed and the Lead cannot record it: both errors come back together."""
        host = await open_team(tmp_path)
        root = await lead(host)
        lead_gate = faulty_log(root.session)
        boom = RuntimeError("start failed")

        def fail(parent: Any) -> None:
            lead_gate.fail_next()  # the flush of the ``failed`` record
            raise boom

        host.continuations.register_provider(Provider("bad", fail))
        with pytest.raises(BaseExceptionGroup) as caught:
            await spawn(host, root, "worker", provider="bad")
        original, recording = caught.value.exceptions
        assert original is boom and recording.code == "TEAM_PERSISTENCE_UNCONFIRMED"
        assert only_member(host, root).phase == "failed"  # visible, flushed by the next commit
        await host.close()
        assert member_phases(stored_team(tmp_path)) == {"worker": "failed"}


class TestForkAndFresh:
    async def test_a_fork_teammate_inherits_the_completed_prefix_and_its_own_descriptor_decides(self, tmp_path: Path) -> None:
        """The fork's inherited events precede its own descriptor; its prompt is its own pending work."""
        host = await open_team(tmp_path, {"lead": [{"text": "ready"}]})
        root = await lead(host)
        root.followup(user_message("hello"))
        await root.when_idle()
        view = await spawn(host, root, "forked", context="fork")
        await host.close()
        header, events = host.store.read(view.id)
        own = events[header.seed_length :]
        assert header.seed_length > 0 and own[0].type == EventType.SUBAGENT_DESCRIPTOR
