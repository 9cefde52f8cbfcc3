"""The PostgreSQL store: one database shared by every process and machine of a Team.

* :class:`PostgresStore` — a :class:`host_spec.storage.StorageBackend` on one
  database (``--store postgresql://...``); needs the ``postgres`` extra (psycopg 3).
* :class:`PostgresLog` — its writer of one session, fenced by a lease epoch.
* :class:`Listener` — the commit notifications (LISTEN/NOTIFY), hints that wake
  readers; after a reconnect it says so, and the reader re-reads from its cursor.
"""

from __future__ import annotations

from host_spec.host.store.postgres.log import PostgresLog
from host_spec.host.store.postgres.notify import Listener, Wakeup
from host_spec.host.store.postgres.store import PostgresStore

__all__ = ["Listener", "PostgresLog", "PostgresStore", "Wakeup"]
