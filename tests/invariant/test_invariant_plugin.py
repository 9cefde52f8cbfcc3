"""Plugin dsh-team-invariant on the reference host: the veto, seeding, disposal and unload.

Real host, real JSONL store; a recorder plugin observes what was published.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from host_spec import hookimpl
from host_spec.errors import ConfigError, InvariantError
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore

from dsh_team_invariant.invariant import TeamStreamInvariant

NAME = "dsh-team-invariant"


class Recorder:
    """Records every committed event type per session (what observers were told)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, str]] = []

    @hookimpl
    def dsh_session_event(self, host: Any, session: Any, event: Any) -> None:
        self.seen.append((session.id, event.seq, event.type))


@asynccontextmanager
async def open_host(data_dir: Path, *, invariant: bool = True, recorder: Recorder | None = None) -> AsyncIterator[Host]:
    extra = [("recorder", recorder)] if recorder is not None else []
    host = await Host.open(data_dir, None, ScriptedModel.from_mapping({}), extra_plugins=extra)
    try:
        if invariant:
            host.plugins.load(NAME, {})
        yield host
    finally:
        await host.close()


def invariant_of(host: Host) -> Any:
    (invariant,) = [found for found in host.plugins.hook_objects(NAME) if isinstance(found, TeamStreamInvariant)]
    return invariant


def member(team: str, id: str, phase: str) -> dict[str, Any]:
    return {"version": 2, "team_id": team, "member": {"id": id, "name": f"name-{id}", "description": "d",
                                                      "provider": "spawn", "context": "fresh", "phase": phase}}


def task(team: str, id: str, revision: int = 1, blocked_by: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"version": 2, "team_id": team, "task": {"id": id, "revision": revision, "subject": "s",
                                                    "description": "d", "status": "pending",
                                                    "blocked_by": list(blocked_by), "write_scopes": []}}


class TestVeto:
    async def test_terminal_first_member_edge(self, tmp_path: Path) -> None:
        """A provisioning record is accepted; a terminal first record is vetoed and never published."""
        recorder = Recorder()
        async with open_host(tmp_path, recorder=recorder) as host:
            session = await host.create_session()
            session.append("team/member", member(session.id, "child-1", "provisioning"))
            with pytest.raises(InvariantError) as info:
                session.append("team/member", member(session.id, "child-2", "active"))
            error = info.value
            assert (error.code, error.plugin) == ("INVARIANT", NAME)
            assert str(error) == (f'invariant violated by "{NAME}": session event 2 violates the Agent Teams '
                                  'stream: team member "child-2" must begin provisioning')
            assert session.last_seq == 1
            assert [seen for seen in recorder.seen if seen[0] == session.id] == [(session.id, 1, "team/member")]
        _, stored = JsonlStore(tmp_path).read(session.id)
        assert [e.type for e in stored] == ["team/member"]

    async def test_invalid_dependency_before_publication(self, tmp_path: Path) -> None:
        """A task with a missing blocker is vetoed; nothing reaches the log on disk."""
        async with open_host(tmp_path) as host:
            session = await host.create_session()
            session.append("turn/start", {"turn": 1})
            with pytest.raises(InvariantError, match='blocker task "task-9" for "task-1" is missing or deleted'):
                session.append("team/task", task(session.id, "task-1", blocked_by=("task-9",)))
        _, events = JsonlStore(tmp_path).read(session.id)
        assert [event.type for event in events] == ["turn/start"]


class TestSeeding:
    async def test_live_sessions_are_seeded_on_load(self, tmp_path: Path) -> None:
        """Sessions live before the plugin loads are folded at load, so their stream continues."""
        async with open_host(tmp_path, invariant=False) as host:
            session = await host.create_session()
            session.append("team/task", task(session.id, "task-1"))
            host.plugins.load(NAME, {})
            assert session.id in invariant_of(host).sessions()
            with pytest.raises(InvariantError, match="revision is not contiguous"):
                session.append("team/task", task(session.id, "task-1", revision=3))
            session.append("team/task", task(session.id, "task-1", revision=2))

    async def test_resumed_session_is_seeded(self, tmp_path: Path) -> None:
        """A resumed session is folded from its stored log when it is created again."""

        async with open_host(tmp_path) as host:
            session = await host.create_session()
            session.append("team/task", task(session.id, "task-1"))
        async with open_host(tmp_path) as host:  # a new host: the stored log is all there is
            session = await host.resume_session(session.id)
            with pytest.raises(InvariantError, match="must begin at revision 1|not contiguous"):
                session.append("team/task", task(session.id, "task-1"))
            session.append("team/task", task(session.id, "task-1", revision=2))

    async def test_disposed_sessions_are_forgotten(self, tmp_path: Path) -> None:
        """A released session's fold is dropped."""
        async with open_host(tmp_path) as host:
            session = await host.create_session()
            assert invariant_of(host).sessions() == [session.id]
            await host.release_session(session)
            assert invariant_of(host).sessions() == []

    async def test_hosts_are_independent(self, tmp_path: Path) -> None:
        """Two hosts in one process keep separate folds."""
        async with open_host(tmp_path / "a") as one, open_host(tmp_path / "b") as two:
            first = await one.create_session("shared-id")
            second = await two.create_session("shared-id")
            first.append("team/task", task("shared-id", "task-1"))
            second.append("team/task", task("shared-id", "task-1"))  # its own stream: revision 1 is right
            assert invariant_of(one) is not invariant_of(two)


class TestLifecycle:
    async def test_unload_stops_the_veto(self, tmp_path: Path) -> None:
        """After unload nothing is checked any more and the per-host fold is unregistered."""
        async with open_host(tmp_path) as host:
            session = await host.create_session()
            invariant = invariant_of(host)
            await host.plugins.unload(NAME)
            assert host.plugins.hook_objects(NAME) == []
            assert all(plugin is not invariant for plugin in host.plugins.pm.get_plugins())
            session.append("team/task", task(session.id, "task-1", revision=5))
            assert session.last_seq == 1

    async def test_reload_reseeds(self, tmp_path: Path) -> None:
        """A hot reload folds the live sessions again and keeps vetoing."""
        async with open_host(tmp_path) as host:
            session = await host.create_session()
            session.append("team/task", task(session.id, "task-1"))
            saved = {k: v for k, v in sys.modules.items() if k.startswith("dsh_team_invariant")}
            try:
                await host.plugins.reload(NAME)
            finally:
                sys.modules.update(saved)
            with pytest.raises(InvariantError):
                session.append("team/task", task(session.id, "task-1"))

    async def test_unknown_config_key(self, tmp_path: Path) -> None:
        """The plugin takes no settings: any key fails the load naming it."""
        async with open_host(tmp_path, invariant=False) as host:
            with pytest.raises(ConfigError, match="strict"):
                host.plugins.load(NAME, {"strict": True})
            assert host.plugins.get(NAME) is None


class TestOneFoldOwner:
    """With the invariant loaded the Team journal adopts its fold: no committed event is folded twice."""

    @asynccontextmanager
    async def team_host(self, data_dir: Path, *, invariant: bool) -> AsyncIterator[Host]:
        async with open_host(data_dir, invariant=invariant) as host:
            host.plugins.load("dsh-team", {})
            yield host

    async def test_the_journal_holds_the_invariants_own_state(self, tmp_path: Path) -> None:
        """Same object, not an equal copy: the journal took the fold the veto computed."""
        from dsh_team import TeamFolds, TeamServiceAPI

        async with self.team_host(tmp_path, invariant=True) as host:
            session = await host.create_session()
            journal = host.service(TeamServiceAPI).journals.get(session)  # type: ignore[attr-defined]
            assert host.service(TeamFolds) is invariant_of(host)
            for revision in (1, 2, 3):
                session.append("team/task", task(session.id, "task-1", revision=revision))
                assert journal.state is invariant_of(host).state(session)
            session.append("turn/start", {"turn": 1})  # a non-Team event changes nothing
            assert journal.state is invariant_of(host).state(session)
            assert journal.state.tasks.tasks["task-1"].revision == 3 and journal.state.position == 3

    async def test_without_the_invariant_the_journal_folds_alone(self, tmp_path: Path) -> None:
        """No provider: the journal folds every event itself, to the same value a replay gives."""
        from dsh_team import TeamServiceAPI, replay

        async with self.team_host(tmp_path, invariant=False) as host:
            session = await host.create_session()
            journal = host.service(TeamServiceAPI).journals.get(session)  # type: ignore[attr-defined]
            session.append("team/task", task(session.id, "task-1"))
            session.append("team/task", task(session.id, "task-2", blocked_by=("task-1",)))
            assert journal.state == replay(session.events, session.id)
            host.plugins.load(NAME, {})  # a provider arrives later: the journal's fold continues on it
            session.append("team/task", task(session.id, "task-2", revision=2))
            assert journal.state is invariant_of(host).state(session)
            assert journal.state == replay(session.events, session.id)


def role(team: str, member_id: str, version: int = 1) -> dict[str, Any]:
    return {"version": version, "team_id": team, "member_id": member_id, "role": "reviewer",
            "spec": {"description": "reviews", "tools": ["read_file"]}}


def shutdown(team: str, member_id: str, phase: str = "requested", version: int = 1) -> dict[str, Any]:
    return {"version": version, "team_id": team, "member_id": member_id, "phase": phase}


class TestSideRecords:
    """``team/role`` and ``team/shutdown`` get the strict decode their books apply, before they are written."""

    @pytest.mark.parametrize(
        ("kind", "payload", "why"),
        [
            ("team/role", {"version": 1, "member_id": "m"}, "unreadable team/role record: Object missing required field `team_id`"),
            ("team/shutdown", {"version": 1, "team_id": "T", "member_id": "m", "phase": "paused"},
             "unreadable team/shutdown record: Invalid enum value 'paused' - at `$.phase`"),
            ("team/role", "VERSION2", "team/role record version 2 is not the supported version 1"),
        ],
    )
    async def test_unreadable_or_unsupported_is_vetoed(self, tmp_path: Path, kind: str, payload: Any, why: str) -> None:
        async with open_host(tmp_path) as host:
            session = await host.create_session()
            session.append("team/role", role(session.id, "first"))
            if payload == "VERSION2":
                payload = role(session.id, "m", version=2)
            elif payload.get("team_id") == "T":
                payload = {**payload, "team_id": session.id}
            with pytest.raises(InvariantError) as info:
                session.append(kind, payload)
            assert str(info.value).endswith(f"session event 2 violates the Agent Teams stream: {why}")
            assert info.value.plugin == NAME
            assert session.last_seq == 1
        assert [event.type for event in JsonlStore(tmp_path).read(session.id)[1]] == ["team/role"]

    async def test_readable_and_foreign_records_pass(self, tmp_path: Path) -> None:
        """A current record of this Team passes; another Team's (a fork's inherited prefix) is not this log's business."""
        async with open_host(tmp_path) as host:
            session = await host.create_session()
            session.append("team/role", role(session.id, "m"))
            session.append("team/shutdown", shutdown(session.id, "m", "approved"))
            session.append("team/shutdown", shutdown("another-team", "m", version=9))
            assert [event.type for event in session.events] == ["team/role", "team/shutdown", "team/shutdown"]

    async def test_without_the_invariant_an_unreadable_record_is_written(self, tmp_path: Path) -> None:
        """The veto is the invariant's: a host without it writes what it is given (the books then skip it)."""
        async with open_host(tmp_path, invariant=False) as host:
            session = await host.create_session()
            session.append("team/role", {"version": 1})
            assert session.last_seq == 1
