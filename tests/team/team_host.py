"""A real reference host with JSONL persistence and the dsh-team plugin, for service tests.

The host is opened over the contract's fault-injecting storage, so a test can
hold a session's writes (to observe what happens before a flush completes) or
fail the next one (``faulty_log`` of ``kit_gates``). Nothing of ours is mocked.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_team.core.records import TEAM_MEMBER, VERSION, MemberRecord
from dsh_team.core.snapshots import TeamMemberSnapshot
from dsh_team.log.journal import Append
from dsh_team.api import TeamServiceAPI
from dsh_team.service import TeamService
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.testing import FaultyStorage
from kit_gates import faulty_log  # noqa: F401 - re-exported to the suites


async def open_host(path: Path, config: Mapping[str, Any] | None = None, *, invariant: bool = False) -> Host:
    host = await Host.open(path, None, ScriptedModel.from_mapping({}), wrap_storage=FaultyStorage)
    host.plugins.load("dsh-team", dict(config or {}))
    if invariant:
        host.plugins.load("dsh-team-invariant")
    return host


def service(host: Host) -> TeamService:
    """The concrete Team service of ``host``: provided by type and registered as its hook object."""
    found = host.service(TeamServiceAPI)
    assert isinstance(found, TeamService) and host.plugins.hook_objects("dsh-team") == [found]
    return found


async def lead(host: Host, session_id: str = "lead") -> Any:
    session = await host.create_session(session_id)
    return host.start_agent(session, name="lead")


async def resume_lead(host: Host, session_id: str = "lead") -> Any:
    session = await host.resume_session(session_id)
    return host.start_agent(session, name="lead", source="resume")


async def child(host: Host, parent: Any, session_id: str, *, name: str = "worker") -> Any:
    session = await host.create_session(session_id, parent_session=parent.id)
    return host.start_agent(session, name=name)


async def add_member(host: Host, root: Any, member_id: str, name: str, phase: str = "active") -> None:
    """Write roster records the way the roster will: provisioning, then the terminal edge."""
    journal = service(host).journals.get(root.session)
    for step in ("provisioning", phase) if phase != "provisioning" else ("provisioning",):
        snapshot = TeamMemberSnapshot(
            id=member_id, name=name, description="worker", provider="spawn", context="fresh", phase=step
        )
        record = MemberRecord(version=VERSION, team_id=root.id, member=snapshot)
        await journal.transact(lambda state, r=record: Append(TEAM_MEMBER, r), lambda state: None, what="member")


async def team(host: Host, *names: str) -> tuple[Any, list[Any]]:
    """A Lead plus active teammates (child sessions listed on the Lead's roster)."""
    root = await lead(host)
    members = []
    for index, name in enumerate(names, 1):
        member = await child(host, root, f"child-{index}", name=name)
        await add_member(host, root, member.id, name)
        members.append(member)
    return root, members




async def hold_open(host: Host, root: Any) -> None:
    """Keep ``root``'s Team from ever being quiescent: a member stays provisioning (no child behind it).

    For tests of wait mechanics, where a quiescence record would end the wait first.
    """
    await add_member(host, root, "child-held", "held", phase="provisioning")
