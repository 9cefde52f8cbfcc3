"""A read-only view of a shared store for ``team show``, ``team serve``, ``trace export`` and ``resume``.

The JSONL :class:`~host_spec.host.cli.extensions.StoreReader` reads headers from
files and salvages a damaged file up to its first bad line; a database has no
lines to salvage, so this reader only needs the backend's own reads. It
implements :class:`host_spec.cli.FollowingReader` (a ``SessionReader``), so every extension reads a
shared store exactly as it reads a data directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from host_spec.cli import SessionFollower, StoredLog
from host_spec.errors import SessionNotFoundError
from host_spec.events import SessionHeader

from host_spec.host.redaction import redact_url

__all__ = ["BackendReader"]


@attrs.define(eq=False)
class BackendReader:
    """Read-only view of a :class:`~host_spec.host.store.postgres.PostgresStore` (implements ``FollowingReader``)."""

    store: Any

    @property
    def checkpoints(self) -> Any:
        """The store's checkpoints (``host_spec.storage.CheckpointingBackend``); a view only reads them."""
        return self.store.checkpoints

    @property
    def root(self) -> Path:
        """Where the logs live, for messages (the store's URL without its password)."""
        return Path(redact_url(self.store.url))

    def list_ids(self) -> list[str]:
        return list(self.store.list_ids())

    def header(self, session_id: str) -> SessionHeader:
        header: SessionHeader = self.store.header(session_id)
        return header

    def roots(self) -> list[str]:
        return list(self.store.roots())

    def latest_root(self) -> str:
        """The most recent root session.

        Raises:
            SessionNotFoundError: no root session is stored.
        """
        found = self.roots()
        if not found:
            raise SessionNotFoundError(f"no root session stored in {redact_url(self.store.url)}")
        return found[-1]

    def read(self, session_id: str, *, salvage: bool = False) -> StoredLog:
        header, events = self.store.read(session_id)
        return StoredLog(header, events)

    def follower(self) -> SessionFollower:
        """A follower of this store's sessions: commit notifications, then reads from each cursor."""
        from host_spec.host.store.postgres.follow import StoreFollower

        return StoreFollower(self.store)

    def holder(self, session_id: str) -> str | None:
        """The holder of ``session_id``'s tree lease while it is live (``None``: free or expired)."""
        from host_spec.host.store.postgres.follow import lease_holder

        return lease_holder(self.store, session_id)
