"""Membership resolution never raises: a failing teammate seam makes the agent no member."""

from __future__ import annotations

from pathlib import Path

from dsh_team.core.state import initial_state
from dsh_team.roster.membership import MembershipResolver
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
    finally:
        await host.close()
