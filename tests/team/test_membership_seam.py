"""Membership resolution never raises: a failing teammate seam makes the agent no member."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import immutables
import msgspec

from dsh_team.core.snapshots import TeamMemberSnapshot
from dsh_team.core.state import Roster, TeamState, initial_state
from dsh_team.log.membership import MembershipResolver, roster_teammate
from host_spec.events import EventType, SubagentDescriptor
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel


async def test_a_failing_teammate_seam_resolves_to_no_membership(tmp_path: Path) -> None:
    host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({}))
    try:
        lead = host.start_agent(await host.create_session("lead"), name="lead")
        child = host.start_agent(await host.create_session("child", parent_session="lead"), name="child")

        def broken(agent, parent, state):
            raise RuntimeError("roster unreadable")

        resolver = MembershipResolver(host.agents, lambda session: initial_state(session.id), broken)
        assert resolver.try_resolve(child) is None
        assert resolver.try_resolve(lead) is not None  # a root needs no seam
        resolver.forget(lead.session)  # a custom seam keeps nothing: nothing to drop
        assert resolver.try_resolve(lead) is not None
    finally:
        await host.close()


#: What a provider's worker carries in its own log (it is then never a Lead).
DESCRIPTOR = SubagentDescriptor(version=2, mode="continuable", provider="spawn")


def _roster(*members: tuple[str, str]) -> Roster:
    """A roster listing ``(child id, phase)`` pairs."""
    snapshots = {
        member_id: TeamMemberSnapshot(
            id=member_id, name=f"n-{member_id}", description="", provider="spawn", context="fresh", phase=phase
        )
        for member_id, phase in members
    }
    return Roster(immutables.Map(snapshots))


class TestKeptResolutions:
    """A resolution kept with its inputs answers exactly like a fresh one after every kind of change."""

    async def test_kept_answers_follow_roster_descriptor_and_liveness_changes(self, tmp_path: Path) -> None:
        host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({}))
        try:
            lead_session = await host.create_session("lead")
            lead = host.start_agent(lead_session, name="lead")
            child_session = await host.create_session("child", parent_session="lead")
            child = host.start_agent(child_session, name="child")
            states = {"lead": initial_state("lead"), "child": initial_state("child")}

            def state_of(session: Any) -> TeamState:
                return states[session.id]

            kept = MembershipResolver(host.agents, state_of)
            # The oracle: another seam object, so nothing is kept and every call resolves afresh.
            fresh = MembershipResolver(host.agents, state_of, lambda a, p, s: roster_teammate(a, p, s))

            def both(agent: Any) -> tuple[str, str] | None:
                answer = kept.try_resolve(agent)
                assert answer == fresh.try_resolve(agent)
                return None if answer is None else (answer.role, answer.team_id)

            assert both(lead) == ("lead", "lead")
            assert both(child) == ("lead", "child")  # not rostered: an ordinary fork leads its own Team
            states["lead"] = msgspec.structs.replace(states["lead"], members=_roster(("child", "active")))
            assert both(child) == ("teammate", "lead")
            assert both(child) == ("teammate", "lead")  # kept: the same roster object
            states["lead"] = msgspec.structs.replace(states["lead"], members=_roster(("child", "failed")))
            assert both(child) == ("lead", "child")
            child_session.append(EventType.SUBAGENT_DESCRIPTOR, DESCRIPTOR)
            assert both(child) is None  # a provider's worker
            states["lead"] = msgspec.structs.replace(states["lead"], members=_roster(("child", "provisioning")))
            assert both(child) == ("teammate", "lead")
            lead_session.append(EventType.SUBAGENT_DESCRIPTOR, DESCRIPTOR)
            assert both(lead) is None
            await host.agents.dispose(lead)
            assert both(lead) is None
            assert both(child) is None  # no live parent, and its own descriptor
            impostor = SimpleNamespace(id="child", session=child_session)
            assert both(impostor) is None  # the right id on another object is no credential
        finally:
            await host.close()

    async def test_a_disposed_session_is_forgotten(self, tmp_path: Path) -> None:
        host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({}))
        try:
            session = await host.create_session("lead")
            lead = host.start_agent(session, name="lead")
            kept = MembershipResolver(host.agents, lambda s: initial_state(s.id))
            assert kept.root_of(lead) is lead  # never resolved: the parent id is read from the session
            first = kept.try_resolve(lead)
            assert kept.root_of(lead) is lead  # resolved: the kept parent id
            assert first is not None and kept.try_resolve(lead) is first  # kept, not rebuilt
            other = await host.create_session("other")
            kept.forget(other)  # never resolved: nothing to drop
            assert kept.try_resolve(lead) is first
            kept.forget(session)
            again = kept.try_resolve(lead)
            assert again == first and again is not first  # resolved afresh
        finally:
            await host.close()
