"""What the PostgreSQL store's tests share: store handles on a fresh database of the shared server."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kit_postgres import shared_server

from host_spec.host.store.postgres import PostgresStore

Opener = Callable[..., PostgresStore]


@pytest.fixture
def open_store() -> Iterator[Opener]:
    """``open_store(**options)``: a handle on one fresh database per test (30 s leases unless told); all closed after."""
    url = shared_server().new_database()
    opened: list[PostgresStore] = []

    def make(**options: float) -> PostgresStore:
        store = PostgresStore(url, **{"lease_seconds": 30.0, "retry_seconds": 5.0, **options})
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def url() -> str:
    """A fresh database of the shared server."""
    return shared_server().new_database()


@pytest.fixture
def store(url: str) -> Iterator[PostgresStore]:
    """A store on :func:`url` (10 s retry window), closed after the test."""
    store = PostgresStore(url, retry_seconds=10)
    yield store
    store.close()
