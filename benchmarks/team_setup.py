"""What the Team benchmarks build: a host's Team service, teammates, and long Lead logs.

Shared by the durable-write, read, cursor, cost and scale benchmarks, so each
measures the same board: ``lead_events`` is a Lead log of task records whose
final board has ``LIVE_TASKS`` live tasks however long it is, written in chunks
(``write_log``) so a million events never sit in memory at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import msgspec

from dsh_team.api import TeamServiceAPI
from dsh_team.core.records import TEAM_MEMBER, VERSION, MemberRecord, TaskRecord
from dsh_team.core.snapshots import TeamMemberSnapshot, TeamTaskSnapshot
from dsh_team.log.journal import Append
from dsh_team.service import TeamService
from host_spec.events import Event, SessionHeader, json_encode
from host_spec.host.app import Host
from host_spec.host.store.jsonl import JsonlStore

__all__ = [
    "BIG", "LIVE_TASKS", "SMALL", "ClaimedBoard", "TypedLine", "add_member", "claimed_board", "lead_events", "teams_of",
    "write_log",
]

LIVE_TASKS = 200
#: The two log lengths the read benchmarks compare (events).
BIG, SMALL = 100_000, 1_000


def teams_of(host: Host) -> TeamService:
    """The host's concrete Team service (provided by type; the benches read its journals)."""
    teams = host.service(TeamServiceAPI)
    assert isinstance(teams, TeamService)
    return teams


async def add_member(host: Host, root: Any, index: int) -> Any:
    """A teammate: a child session listed on the Lead's roster (what spawn_teammate leaves behind)."""
    session = await host.create_session(f"member-{index}", parent_session=root.id)
    agent = host.start_agent(session, name=f"m{index}")
    journal = teams_of(host).journals.get(root.session)
    for phase in ("provisioning", "active"):
        snapshot = TeamMemberSnapshot(
            id=agent.id, name=f"m{index}", description="bench", provider="spawn", context="fresh", phase=phase
        )
        record = MemberRecord(version=VERSION, team_id=root.id, member=snapshot)
        await journal.transact(lambda state, r=record: Append(TEAM_MEMBER, r), lambda state: None, what="member")
    return agent


class ClaimedBoard(NamedTuple):
    """A Lead and its teammates, each owning one claimed task (what the update benches edit)."""

    teams: TeamService
    session: Any
    root: Any
    members: list[Any]
    views: dict[str, Any]


async def claimed_board(host: Host, members: int) -> ClaimedBoard:
    """A Lead session with ``members`` teammates, each member and the Lead owning one in-progress task.

    The Team plugin is loaded here; ``views`` maps each agent id to its task's latest view.
    """
    host.plugins.load("dsh-team", {})
    teams = teams_of(host)
    session = await host.create_session("lead")
    root = host.start_agent(session, name="lead")
    agents = [await add_member(host, root, i) for i in range(members)]
    views: dict[str, Any] = {}
    for member in [root, *agents]:
        view = await teams.create_task(member, subject="bench task", description="a task for the benchmark")
        views[member.id] = await teams.update_task(member, task_id=view.id, expected_revision=1, action="claim")
    return ClaimedBoard(teams, session, root, agents, views)


def lead_events(count: int, team_id: str, live: int = LIVE_TASKS) -> Iterator[Event]:
    """A Lead log of ``count`` task events: ``live`` creations, then CAS updates.

    Updates cycle claim -> complete -> reopen over every task, so revisions stay
    contiguous and the final board has ``live`` live tasks whatever ``count``.
    """
    cycle = (("in_progress", "member-1"), ("completed", "member-1"), ("pending", None))
    latest: dict[str, TeamTaskSnapshot] = {}
    for seq in range(1, count + 1):
        index = (seq - 1) % live
        task_id = f"task-{index + 1}"
        previous = latest.get(task_id)
        if previous is None:
            blockers = (f"task-{index}",) if index % 7 == 6 else ()
            task = TeamTaskSnapshot(
                id=task_id,
                revision=1,
                subject=f"subject of {task_id}",
                description="a realistic description of what this task is about " * 3,
                status="pending",
                blocked_by=blockers,
                write_scopes=(f"src/module{index % 13}",),
            )
        else:
            status, owner = cycle[(previous.revision - 1) % 3]
            task = msgspec.structs.replace(previous, revision=previous.revision + 1, status=status, owner_id=owner)
        latest[task_id] = task
        data = msgspec.Raw(json_encode(TaskRecord(version=2, team_id=team_id, task=task)))
        yield Event(seq=seq, time=1_700_000_000_000 + seq, type="team/task", data=data)


def write_log(store: JsonlStore, session_id: str, events: Iterable[Event]) -> None:
    """Store ``events`` as the log of a new session, 10k events per append (never all in memory)."""
    backend = store.create(SessionHeader(id=session_id, created_at=0))
    try:
        written, chunk = 0, list(itertools.islice(events, 10_000))
        while chunk:
            backend.append(chunk, expected_seq=written)
            backend.sync()
            written += len(chunk)
            chunk = list(itertools.islice(events, 10_000))
    finally:
        backend.close()


class TypedLine(msgspec.Struct):
    """The baseline: each line decoded straight into a fully typed task event."""

    seq: int
    time: int
    type: str
    data: TaskRecord
    cause: dict[str, Any] | None = None
