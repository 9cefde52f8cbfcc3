"""One process per Team: an exclusive lock per session tree, held while any of its sessions is open.

A Team is a root session and every session below it. Its guarantees (a message
delivered exactly once, a teammate held by one activation) hold only while one
process owns the whole tree: a second process that resumed a teammate asleep on
disk could hold it exactly when the live Lead delivers to it. So opening *any*
session for writing first takes the lock of its tree,
``<root>/teams/<encoded-root-id>.lock`` (``flock``, non-blocking). Within one
store the lock is counted (a Lead and its teammates share it) and released when
the last open session of the tree closes; another process gets
``SESSION_LOCKED`` naming the tree's root.

The root of a session is found from the headers: a session opened by this store
already knows its root; otherwise parent links are followed through the stored
headers. A parent that is neither open here nor stored (not materialized yet, or
gone) is taken as the root, which is exact for the common case (a Lead whose log
is not yet on disk).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

from host_spec.errors import SessionError, SessionLockedError

from host_spec.host.store.jsonl_format import LOG_NAME, encode_id, parse_header

__all__ = ["TeamLocks"]

#: Parent links followed at most (a cycle in damaged headers must not spin).
_MAX_DEPTH = 1000


class TeamLocks:
    """The tree locks of one store, counted per root; see the module docstring.

    Args:
        root: The data directory (locks live in ``root/teams``).
        sessions_dir: Where session logs live (headers are read from there).
    """

    def __init__(self, root: Path, sessions_dir: Path) -> None:
        self.directory = root / "teams"
        self.sessions_dir = sessions_dir
        self._held: dict[str, list[int]] = {}  # root id -> [fd, count]
        self._roots: dict[str, str] = {}  # open session id -> root id

    def root_of(self, session_id: str, parent: str | None) -> str:
        """The root of a session whose parent link is ``parent``."""
        current, seen = session_id, {session_id}
        while parent is not None and len(seen) < _MAX_DEPTH:
            known = self._roots.get(parent)
            if known is not None:
                return known
            if parent in seen:
                break
            seen.add(parent)
            current = parent
            parent = self.stored_parent(parent)
        return current

    def stored_parent(self, session_id: str) -> str | None:
        """The parent link in ``session_id``'s stored header (``None``: a root, or not readable)."""
        path = self.sessions_dir / encode_id(session_id) / LOG_NAME
        try:
            with path.open("rb") as handle:
                return parse_header(handle.readline().rstrip(b"\n"), path).parent_session
        except (OSError, SessionError):
            return None  # not stored (yet) or unreadable: treat it as the root

    def acquire(self, session_id: str, parent: str | None) -> Callable[[], None]:
        """Take (or count) the lock of ``session_id``'s tree; returns its release.

        Raises:
            SessionLockedError: another process has a session of this tree open.
            SessionError: the lock file cannot be opened.
        """
        root = self.root_of(session_id, parent)
        held = self._held.get(root)
        if held is None:
            held = self._held[root] = [self._lock(root, session_id), 0]
        held[1] += 1
        self._roots[session_id] = root
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._roots.pop(session_id, None)  # the session lock keeps one open log per id
            held[1] -= 1
            if held[1] == 0 and self._held.get(root) is held:
                del self._held[root]
                os.close(held[0])  # closing the description releases the flock

        return release

    def _lock(self, root: str, session_id: str) -> int:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.directory / f"{encode_id(root)}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise SessionError(f"cannot open the Team lock at {self.directory}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            where = "" if root == session_id else f" (it belongs to the session tree of {root})"
            raise SessionLockedError(
                f"session {session_id} is open in another process{where}: one process per Team",
                session=session_id,
                root=root,
            ) from None
        return fd
