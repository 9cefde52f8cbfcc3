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
