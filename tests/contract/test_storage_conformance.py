"""The storage conformance suite run against every backend this repository ships.

The JSONL store is the reference host's backend; the in-memory backend is an
independent second implementation (if the two disagree, the suite is too loose
or one of them is wrong); the fault-injecting wrapper must be transparent until
a fault is armed, so it runs the suite over both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from host_spec.host.store.jsonl import JsonlStore
from host_spec.storage import SessionLog, StorageBackend
from host_spec.testing import FaultyStorage, MemoryStorage, StorageBackendContract, StorageFactory


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


@pytest.mark.parametrize("backend", [JsonlStore("/nonexistent"), MemoryStorage(), FaultyStorage(MemoryStorage())])
def test_every_shipped_backend_satisfies_the_protocols(backend: StorageBackend) -> None:
    assert isinstance(backend, StorageBackend)
    if not isinstance(backend, JsonlStore):
        from host_spec.events import SessionHeader

        log = backend.create(SessionHeader(id="x", created_at=1))
        assert isinstance(log, SessionLog)
        log.close()
