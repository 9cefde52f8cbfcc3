"""A real reference host with JSONL persistence and the dsh-team plugin, for service tests.

Fault injection wraps the session's real JSONL backend (:class:`Gate`): it can hold
a write (to observe what happens before a flush completes) or fail the next one.
Nothing of ours is mocked.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_team.core.records import TEAM_MEMBER, VERSION, MemberRecord, TeamMemberSnapshot
from dsh_team.log.journal import Append
from dsh_team.plugin import service_for
from dsh_team.service import TeamService
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel


async def open_host(path: Path, config: Mapping[str, Any] | None = None, *, invariant: bool = False) -> Host:
    host = await Host.open(path, None, ScriptedModel.from_mapping({}))
    host.plugins.load("dsh-team", dict(config or {}))
    if invariant:
        host.plugins.load("dsh-team-invariant")
    return host


def service(host: Host) -> TeamService:
    found = service_for(host)
    assert found is not None and host.service("agent_teams") is found
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


class Gate:
    """Wraps a session's real backend: hold writes until released, or fail the next write."""

    #: Held writes block until the test releases them: never write on the loop thread.
    inline = False

    def __init__(self, session: Any) -> None:
        # The reference host keeps the writer on its group-commit helper (older: on the session).
        self.holder = getattr(session, "_commit", session)
        self.session = session
        self.real = self.holder._backend
        self.open = threading.Event()
        self.open.set()
        self.entered = threading.Event()
        self.failures: list[BaseException] = []
        self.writes = 0
        self.holder._backend = self

    def hold(self) -> None:
        self.open.clear()
        self.entered.clear()

    def release(self) -> None:
        self.open.set()

    def fail_next(self, error: BaseException | None = None) -> None:
        self.failures.append(error or OSError(28, "No space left on device"))

    def write(self, events: Any) -> None:
        self.entered.set()
        self.open.wait(10)
        self.writes += 1
        if self.failures:
            raise self.failures.pop(0)
        self.real.write(events)

    def close(self) -> None:
        self.real.close()

    async def wait_entered(self) -> None:
        while not self.entered.is_set():
            await asyncio.sleep(0.001)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)
