"""The storage conformance suite run against every backend this repository ships.

The JSONL store is the reference host's backend; the in-memory backend is an
independent second implementation (if the two disagree, the suite is too loose
or one of them is wrong); the fault-injecting wrapper must be transparent until
a fault is armed, so it runs the suite over both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from host_spec.events import EventType, SessionHeader
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import user_message
from host_spec.storage import SessionLog, StorageBackend
from host_spec.testing import (
    CheckpointsContract,
    CheckpointsFactory,
    FaultyStorage,
    MemoryStorage,
    StorageBackendContract,
    StorageFactory,
)


class TestJsonlStore(StorageBackendContract):
    @pytest.fixture
    def storage(self, tmp_path: Path) -> StorageFactory:
        return lambda: JsonlStore(tmp_path)


class TestMemoryStorage(StorageBackendContract):
    @pytest.fixture
    def storage(self) -> StorageFactory:
        medium = MemoryStorage()
        return medium.reopen


class TestSharedMemoryStorage(StorageBackendContract):
    """Writers are not exclusive: the stored tail alone decides, as in a database."""

    @pytest.fixture
    def storage(self) -> StorageFactory:
        medium = MemoryStorage(exclusive=False)
        return medium.reopen


class TestFaultyJsonlStore(StorageBackendContract):
    @pytest.fixture
    def storage(self, tmp_path: Path) -> StorageFactory:
        return lambda: FaultyStorage(JsonlStore(tmp_path))


class TestFaultyMemoryStorage(StorageBackendContract):
    @pytest.fixture
    def storage(self) -> StorageFactory:
        medium = MemoryStorage()
        return lambda: FaultyStorage(medium.reopen())


@pytest.mark.parametrize("make", [JsonlStore, lambda _: MemoryStorage(), lambda path: FaultyStorage(JsonlStore(path))])
def test_every_shipped_backend_satisfies_the_protocols(make: Any, tmp_path: Path) -> None:
    backend = make(tmp_path)
    assert isinstance(backend, StorageBackend)
    log = backend.create(SessionHeader(id="x", created_at=1))
    assert isinstance(log, SessionLog)
    log.close()


class TestTheReferenceHostOnAnotherBackend:
    """Nothing in the host assumes JSONL files: it runs, persists and resumes on any backend."""

    async def test_a_run_persists_and_a_new_host_resumes_it(self) -> None:
        medium = MemoryStorage()
        script = {"lead": [{"text": "first"}, {"text": "second"}]}
        host = Host(store=medium.reopen(), model=ScriptedModel.from_mapping(script))
        agent = await host.run("hello", session_id="root")
        await host.close()
        stored = medium.read("root")[1]
        assert [event.type for event in stored].count(EventType.TURN_END) == 1
        again = Host(store=medium.reopen(), model=ScriptedModel.from_mapping({"lead": [{"text": "second"}]}))
        resumed = await again.resume(agent.id)
        resumed.followup(user_message("more"))
        await again.quiesce()
        await again.close()
        events = medium.read("root")[1]
        assert events[: len(stored)] == stored and [event.seq for event in events] == list(range(1, len(events) + 1))
        assert [event.type for event in events].count(EventType.TURN_END) == 2

    async def test_a_failed_flush_is_retried_at_the_same_tail(self) -> None:
        medium = MemoryStorage()
        storage = FaultyStorage(medium)
        host = Host(store=storage, model=ScriptedModel.from_mapping({}))
        session = await host.create_session("s")
        session.append("test/a", {})
        storage.log("s").fail_next()
        with pytest.raises(OSError):
            await session.flush()
        session.append("test/b", {})
        await session.flush()
        await host.close()
        assert [event.type for event in medium.read("s")[1]] == ["test/a", "test/b"]
        assert storage.log("s").batches == [[1, 2]]


class TestJsonlCheckpoints(CheckpointsContract):
    @pytest.fixture
    def checkpoints(self, tmp_path: Path) -> CheckpointsFactory:
        return lambda: JsonlStore(tmp_path).checkpoints


class TestMemoryCheckpoints(CheckpointsContract):
    @pytest.fixture
    def checkpoints(self) -> CheckpointsFactory:
        medium = MemoryStorage()
        return lambda: medium.reopen().checkpoints
