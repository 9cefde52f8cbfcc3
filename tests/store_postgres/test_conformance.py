"""The storage conformance suite, unchanged, against a real PostgreSQL server.

Each test gets a fresh database; every ``storage()`` call is a new
:class:`PostgresStore` handle (its own connection and lease holder), as a second
process would be.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kit_postgres import shared_server

from host_spec.host.store.postgres import PostgresStore
from host_spec.storage import SessionLog, StorageBackend
from host_spec.events import SessionHeader
from host_spec.testing import CheckpointsContract, CheckpointsFactory, FaultyStorage, StorageBackendContract, StorageFactory


@pytest.fixture
def database() -> str:
    return shared_server().new_database()


@pytest.fixture
def handles(database: str) -> Iterator[list[PostgresStore]]:
    opened: list[PostgresStore] = []
    yield opened
    for store in opened:
        store.close()


def _factory(database: str, opened: list[PostgresStore]) -> StorageFactory:
    def make() -> PostgresStore:
        store = PostgresStore(database, lease_seconds=30, retry_seconds=5)
        opened.append(store)
        return store

    return make


class TestPostgresStore(StorageBackendContract):
    @pytest.fixture
    def storage(self, database: str, handles: list[PostgresStore]) -> StorageFactory:
        return _factory(database, handles)


class TestFaultyPostgresStore(StorageBackendContract):
    @pytest.fixture
    def storage(self, database: str, handles: list[PostgresStore]) -> StorageFactory:
        make = _factory(database, handles)
        return lambda: FaultyStorage(make())


def test_the_store_satisfies_the_protocols(database: str, handles: list[PostgresStore]) -> None:
    store = _factory(database, handles)()
    assert isinstance(store, StorageBackend)
    log = store.create(SessionHeader(id="x", created_at=1))
    assert isinstance(log, SessionLog)
    log.close()


class TestPostgresCheckpoints(CheckpointsContract):
    """The checkpoint conformance suite: every ``checkpoints()`` is a new store handle (its own connection)."""

    @pytest.fixture
    def checkpoints(self, database: str, handles: list[PostgresStore]) -> CheckpointsFactory:
        make = _factory(database, handles)
        return lambda: make().checkpoints
