"""Leases with fencing epochs: who may write a session tree of a shared store, and until when.

The JSONL store keeps a Team in one process with a file lock; a database shared
by several machines cannot lean on a lock that dies with its process, so a
writer holds a *lease* instead: a row naming the holder, an expiry on the
server's clock, and an epoch that every claim raises. A claim succeeds when the
lease is free or expired; every append carries the epoch it was opened under
and the database refuses it once the epoch moved on
(:class:`~host_spec.errors.SessionFencedError`), so a holder presumed dead that
comes back can never write again. A live holder keeps its leases by renewing
them from a heartbeat thread every third of the lease time; a holder that dies
(SIGKILL, a machine lost) stops renewing, and after ``lease_seconds`` another
process may claim and cold-resume.

Within one store the lease of a tree is counted: the Lead and its teammates
opened by the same process share one claim and one epoch, released when the last
of them closes.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import structlog

from host_spec.errors import DshError, SessionLockedError, StoreUnavailableError

from host_spec.host.store.postgres.link import Link

__all__ = ["Leases"]

log = structlog.get_logger(__name__)

_CLAIM = """
INSERT INTO dsh_leases AS l (key, holder, epoch, expires_at, last_holder)
VALUES (%(key)s, %(holder)s, 1, now() + make_interval(secs => %(ttl)s), %(holder)s)
ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, epoch = l.epoch + 1, expires_at = excluded.expires_at,
    last_holder = excluded.holder
WHERE l.holder IS NULL OR l.expires_at < now()
RETURNING l.epoch
"""
_RENEW = """
UPDATE dsh_leases SET expires_at = now() + make_interval(secs => %(ttl)s)
WHERE key = %(key)s AND holder = %(holder)s AND epoch = %(epoch)s
"""
_RELEASE = "UPDATE dsh_leases SET holder = NULL, expires_at = NULL WHERE key = %(key)s AND holder = %(holder)s AND epoch = %(epoch)s"
_WHO = "SELECT holder, epoch, greatest(0, extract(epoch FROM expires_at - now())) FROM dsh_leases WHERE key = %s"
_LAST = "SELECT coalesce(holder, last_holder), epoch, holder IS NOT NULL FROM dsh_leases WHERE key = %s"


class Leases:
    """The leases one store handle holds (see the module docstring).

    Args:
        link: The handle's connection for claims and releases.
        heartbeat: A second connection the renewal thread uses (never blocked by appends).
        holder: This handle's name in the ``holder`` column (host, pid and a random part).
        lease_seconds: How long a claim or renewal lasts without another renewal.
    """

    def __init__(self, link: Link, heartbeat: Link, holder: str, lease_seconds: float) -> None:
        self.link = link
        self.holder = holder
        self.lease_seconds = lease_seconds
        self._heartbeat = heartbeat
        self._held: dict[str, list[int]] = {}  # key -> [epoch, count]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: set[str] = set()  # keys whose renewal or release found the lease taken over
        self.epochs: dict[str, int] = {}  # key -> the epoch this handle last held it under (kept after release)

    def epoch(self, key: str) -> int:
        """The epoch this handle holds ``key`` under (``KeyError``: not held)."""
        return self._held[key][0]

    def acquire(self, key: str, session_id: str) -> int:
        """Claim (or count) the lease of ``key`` for a writer of ``session_id``; returns its epoch.

        Raises:
            SessionLockedError: another holder's lease on ``key`` has not expired.
            StoreUnavailableError: the database cannot be reached.
        """
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                held[1] += 1
                return held[0]
        params = {"key": key, "holder": self.holder, "ttl": self.lease_seconds}
        row = self.link.run(lambda conn, _: conn.execute(_CLAIM, params).fetchone())
        if row is None:
            holder, epoch, left = self.link.run(lambda conn, _: conn.execute(_WHO, (key,)).fetchone()) or (None, 0, 0)
            where = "" if key == session_id else f" (it belongs to the session tree of {key})"
            raise SessionLockedError(
                f"session {session_id} is held by {holder} under lease epoch {epoch}{where}; "
                f"the lease expires in {float(left):.1f}s unless its holder renews it",
                session=session_id, root=key, holder=holder, epoch=epoch,
            )
        with self._lock:
            self._held[key] = [int(row[0]), 1]
            self.epochs[key] = int(row[0])
            self.lost.discard(key)
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name=f"dsh-lease-{self.holder}", daemon=True)
                self._thread.start()
        return int(row[0])

    def release(self, key: str) -> None:
        """Uncount ``key``; the last release frees the lease for other holders at once."""
        with self._lock:
            held = self._held.get(key)
            if held is None:
                return
            held[1] -= 1
            if held[1] > 0:
                return
            del self._held[key]
        params = {"key": key, "holder": self.holder, "epoch": held[0]}
        try:
            cursor: Any = self.link.run(lambda conn, _: conn.execute(_RELEASE, params))
        except StoreUnavailableError:
            log.warning("store.lease_release_failed", key=key)  # it expires on its own
            return
        if cursor.rowcount == 0:  # the lease was no longer ours to release: another holder claimed it
            self.lost.add(key)

    def holder_of(self, key: str) -> tuple[str | None, int]:
        """Who holds ``key`` now and under which epoch (``(None, 0)``: never claimed)."""
        row = self.link.run(lambda conn, _: conn.execute(_WHO, (key,)).fetchone())
        return (row[0], int(row[1])) if row is not None else (None, 0)

    def last_claim(self, key: str) -> tuple[str | None, int, bool]:
        """Who claimed ``key`` last, under which epoch, and whether it still holds it.

        A lease row keeps its last claimant after a release (``last_holder``,
        layout 4), so a process that lost its Team can name the holder that took
        it over even once that holder has finished and let it go.
        """
        row = self.link.run(lambda conn, _: conn.execute(_LAST, (key,)).fetchone())
        if row is None:
            return None, 0, False
        return row[0], int(row[1]), bool(row[2])

    def renew(self) -> None:
        """Renew every held lease now (the heartbeat does this every third of the lease time)."""
        with self._lock:
            held = [(key, entry[0]) for key, entry in self._held.items()]
        for key, epoch in held:
            params = {"key": key, "holder": self.holder, "epoch": epoch, "ttl": self.lease_seconds}
            cursor: Any = self._heartbeat.run(lambda conn, _: conn.execute(_RENEW, params))
            if cursor.rowcount == 0 and key not in self.lost:
                self.lost.add(key)
                log.warning("store.lease_lost", key=key, holder=self.holder, epoch=epoch)

    def _beat(self) -> None:
        failing = False  # told once per outage, not at every beat (the connection's own lines say more)
        while not self._stop.wait(self.lease_seconds / 3):
            try:
                self.renew()
            except (DshError, psycopg.Error) as exc:
                if not failing:
                    log.warning("store.lease_renewal_failed", holder=self.holder,
                                error=exc.code if isinstance(exc, DshError) else type(exc).__name__)
                failing = True
            else:
                failing = False

    def close(self) -> None:
        """Stop renewing (leases still held expire on their own)."""
        self._stop.set()
        self._heartbeat.close()
