"""The live session store: creates, resumes, flushes and disposes sessions.

It owns the bookkeeping the ``Session`` itself should not know about: which ids
are live, where their logs live (a :class:`JsonlStore`, or nowhere), and how a
seed becomes the inherited prefix of a new log. The logs live in any
:class:`~host_spec.storage.StorageBackend` (the reference host's is a
:class:`~host_spec.host.store.jsonl.JsonlStore`). With ``store=None`` everything
stays in memory — disposed sessions are kept as snapshots so ``resume`` and
``inspect`` still work — which is what unit tests of the upper layers want.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable, Sequence

import attrs
import msgspec
import structlog

from host_spec.errors import (
    SessionError,
    SessionExistsError,
    SessionFencedError,
    SessionNotFoundError,
    SessionNotLiveError,
)
from host_spec.events import Event, SessionHeader
from host_spec.storage import CheckpointingBackend, Checkpoints, StorageBackend

from host_spec.host.store.sequence_views import EventsView, Prefix
from host_spec.host.store.history import KEPT_EVENTS
from host_spec.host.store.session import Session, SessionObserver, time_ms

__all__ = ["PersistedSession", "SessionStore"]

log = structlog.get_logger(__name__)


@attrs.frozen
class PersistedSession:
    """A read-only snapshot of a session (implements ``protocols.PersistedSession``).

    ``events`` is a tuple, or a frozen view of a disposed in-memory session's
    event list, so keeping a sleeping session costs no copy.
    """

    header: SessionHeader
    events: Sequence[Event]

    def own_events(self) -> Sequence[Event]:
        """Events after the inherited prefix (``events[header.seed_length:]``, a view: no copy)."""
        return EventsView(self.events, self.header.seed_length)


class SessionStore:
    """Live sessions over an optional storage backend (implements ``protocols.SessionStore`` and ``storage.CheckpointedSessions``).

    Args:
        store: Where logs are persisted (any ``host_spec.storage.StorageBackend``, e.g.
            a ``JsonlStore``, or a test's fault-injecting wrapper around one);
            ``None`` keeps sessions in memory only.
        observer: Receives every session's veto, commit and flush callbacks
            (``None``: a no-op observer).
        clock: Epoch-milliseconds source for headers and events.

    Attributes:
        kept_events: Durable events each session created or resumed from now on
            keeps decoded in memory when its log can read them back; older ones are read
            back from it (:mod:`.history`). Lower it to exercise that path.
    """

    def __init__(
        self, store: StorageBackend | None, observer: SessionObserver | None, *, clock: Callable[[], int] = time_ms
    ) -> None:
        self.store = store
        self._observer = observer
        self._clock = clock
        self._live: dict[str, Session] = {}
        self._memory: dict[str, PersistedSession] = {}  # disposed sessions when store is None
        self._counter = itertools.count(1)
        self.kept_events = KEPT_EVENTS

    def __repr__(self) -> str:
        return f"<SessionStore live={len(self._live)} store={self.store!r}>"

    def create(
        self,
        session_id: str | None = None,
        *,
        parent_session: str | None = None,
        seed: Sequence[Event] = (),
        origin: str | None = None,
        cwd: str | None = None,
        delegation_depth: int = 0,
    ) -> Session:
        """Create a live session; nothing is written until its first flush with events.

        ``seed`` events are copied with seqs ``1..n`` and become the inherited prefix
        (``header.seed_length == n``); they are not shown to the observer.

        Raises:
            SessionExistsError: the id is live or stored.
            SessionLockedError: another process is writing a session with this id.
            SessionError: an invalid id, ``cwd`` or ``delegation_depth``.
        """
        if session_id is None:
            session_id = self.new_id()
        elif not isinstance(session_id, str) or not session_id:
            raise SessionError(f"session id must be a non-empty string, got {session_id!r}", code="SESSION_INVALID_ID")
        if cwd is not None and not os.path.isabs(cwd):
            raise SessionError(f"session cwd must be absolute, got {cwd!r}", code="SESSION_INVALID_HEADER")
        if delegation_depth < 0:
            raise SessionError(f"delegation_depth must be >= 0, got {delegation_depth}", code="SESSION_INVALID_HEADER")
        if session_id in self._live or session_id in self._memory:
            raise SessionExistsError(f"session {session_id} already exists", session=session_id)
        header = SessionHeader(
            id=session_id,
            created_at=self._clock(),
            cwd=cwd,
            parent_session=parent_session,
            seed_length=len(seed),
            origin=origin,
            delegation_depth=delegation_depth,
        )
        events = [msgspec.structs.replace(event, seq=seq) for seq, event in enumerate(seed, 1)]
        backend = self.store.create(header) if self.store is not None else None
        session = Session(
            header, events=events, backend=backend, observer=self._observer, clock=self._clock,
            kept_events=self.kept_events,
        )
        self._live[session_id] = session
        return session

    def new_id(self) -> str:
        """A session id that is neither live nor stored (``session-<n>``)."""
        while True:
            candidate = f"session-{next(self._counter)}"
            if not self.exists(candidate):
                return candidate

    def resume(self, session_id: str) -> Session:
        """Activate a stored session (its torn tail repaired on disk); it is live again.

        Raises:
            SessionExistsError: the session is already live here.
            SessionNotFoundError: nothing is stored under this id.
            SessionLockedError: another process holds its log.
            SessionCorruptError / SessionFormatError: the log cannot be read.
        """
        if session_id in self._live:
            raise SessionExistsError(f"session {session_id} is already live", session=session_id)
        if self.store is not None:
            if not self.store.exists(session_id):
                raise SessionNotFoundError(f"session {session_id} not found", session=session_id)
            backend, events = self.store.resume(session_id)
            header = backend.header
        else:
            stored = self._memory.pop(session_id, None)
            if stored is None:
                raise SessionNotFoundError(f"session {session_id} not found", session=session_id)
            backend, header = None, stored.header
            # A disposed session's list is handed over (nothing else appends to it).
            events = stored.events.items if isinstance(stored.events, Prefix) else list(stored.events)
        session = Session(
            header,
            events=events,
            backend=backend,
            observer=self._observer,
            clock=self._clock,
            durable_seq=len(events),
            checked=True,
            kept_events=self.kept_events,
        )
        self._live[session_id] = session
        return session

    def get(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def list(self) -> Sequence[Session]:
        """Live sessions in creation (or resume) order."""
        return tuple(self._live.values())

    @property
    def durable(self) -> bool:
        """Whether flushes reach a store that survives the process (not memory only)."""
        return self.store is not None

    @property
    def checkpoints(self) -> Checkpoints | None:
        """The backend's checkpoints (``host_spec.storage.CheckpointedSessions``), or ``None``."""
        store = self.store
        return store.checkpoints if isinstance(store, CheckpointingBackend) else None

    def exists(self, session_id: str) -> bool:
        """Whether the id is live, stored on disk, or kept in memory."""
        if session_id in self._live or session_id in self._memory:
            return True
        return self.store is not None and self.store.exists(session_id)

    async def flush(self, session: Session) -> None:
        """The durability barrier for ``session``.

        Raises:
            SessionNotLiveError: ``session`` is not a live session of this store.
        """
        if self._live.get(session.id) is not session:
            raise SessionNotLiveError(f"session {session.id} is not live in this store", session=session.id)
        await session.flush()

    async def inspect(self, session_id: str) -> PersistedSession:
        """A read-only snapshot: the live session's events, or the stored log (not repaired).

        Raises:
            SessionNotFoundError: nothing is live or stored under this id.
            SessionCorruptError / SessionFormatError: the stored log cannot be read.
        """
        live = self._live.get(session_id)
        if live is not None:
            return PersistedSession(live.header, tuple(live.events))
        if self.store is None:
            stored = self._memory.get(session_id)
            if stored is None:
                raise SessionNotFoundError(f"session {session_id} not found", session=session_id)
            return stored
        header, events = await asyncio.to_thread(self.store.read, session_id)
        return PersistedSession(header, tuple(events))

    async def dispose(self, session: Session) -> None:
        """Final flush, close the log (releasing its lock), leave the live set. Idempotent.

        The session is closed and removed even when the final flush fails; the
        failure is raised afterwards, since the unflushed tail is then lost. A
        flush refused because another holder took the session over
        (``SESSION_FENCED``) is not a failure of this teardown: the tail is not
        lost but the new holder's to redo from the log, so it is logged on one line
        and the disposal completes (the process reports the takeover itself).
        """
        if self._live.get(session.id) is not session:
            return
        try:
            await session.flush()
        except SessionFencedError as exc:
            log.warning("session.fenced_at_close", session=session.id, epoch=exc.details.get("epoch"),
                        current=exc.details.get("current"))
        finally:
            # Two disposals can overlap (an agent released while its parent drains it): the
            # first to finish its flush removes and closes; the other finds it gone.
            if self._live.get(session.id) is session:
                del self._live[session.id]
                session.close()
                if self.store is None:
                    self._memory[session.id] = PersistedSession(session.header, Prefix(session.closed_events()))

    def discard(self, session: Session) -> None:
        """Close ``session`` without a final flush and leave the live set. Idempotent.

        For a creation that is rolled back before anything was made durable: the
        pending events are dropped, so no half-written log (nor, in memory mode, a
        snapshot) remains to be resumed.
        """
        if self._live.get(session.id) is not session:
            return
        del self._live[session.id]
        session.close()

    async def close(self) -> None:
        """Dispose every live session, newest first (every one is attempted)."""
        errors: list[BaseException] = []
        for session in reversed(self.list()):
            try:
                await self.dispose(session)
            except Exception as exc:
                log.error("session.dispose_failed", session=session.id, error=repr(exc))
                errors.append(exc)
        if errors:
            raise errors[0]
