"""Session activation: the host announces a session before its agent exists and disposes it once.

The store and the agent layer never call hooks themselves, so activating a session
is the host's job. :meth:`SessionActivation.create_session` and
:meth:`SessionActivation.resume_session` announce a session
(``dsh_session_created``, a veto) *before* its agent is built, so a plugin can
refuse it while nothing depends on it yet; a refused session is discarded and
leaves nothing written. :meth:`SessionActivation.release_session` detaches a
session (final flush) and fires ``dsh_session_disposed`` exactly once per
activation, however many paths (agent disposal, host close, a failed start) try
to release it.

:class:`SessionActivation` is a part of :class:`host_spec.host.app.Host`: it holds
no state of its own and works on the host's session store and plugin manager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from host_spec.host.plugins.manager import PluginManager
    from host_spec.host.store.sessions import SessionStore

__all__ = ["SessionActivation"]


class SessionActivation:
    """The host's session activations: announce, release, discard (a part of ``Host``).

    Attributes:
        sessions: The live session store (set by the host).
        plugins: The plugin manager the announcements go through (set by the host).
    """

    sessions: SessionStore
    plugins: PluginManager
    _announced: dict[str, Any]

    async def create_session(self, session_id: str | None = None, **options: Any) -> Any:
        """Create a session in the store and announce it (``dsh_session_created``, veto).

        Raises:
            Exception: a vetoing plugin's error, after the session was released.
        """
        session = self.sessions.create(session_id, **options)
        await self._announce(session)
        return session

    async def resume_session(self, session_id: str) -> Any:
        """Activate a stored session (torn tail repaired) and announce it.

        Raises:
            SessionNotFoundError: nothing is stored under ``session_id``.
            SessionLockedError: another process holds the log.
        """
        session = self.sessions.resume(session_id)
        await self._announce(session)
        return session

    async def _announce(self, session: Any) -> None:
        self._announced[session.id] = session
        try:
            self.plugins.veto("dsh_session_created", host=self, session=session)
        except BaseException:
            await self.discard_session(session)  # a vetoed session leaves nothing written (a fork seed included)
            raise

    async def release_session(self, session: Any) -> None:
        """Final flush, detach from the live store, then ``dsh_session_disposed`` (once)."""
        try:
            await self.sessions.dispose(session)
        finally:
            self._unannounce(session)

    async def discard_session(self, session: Any) -> None:
        """Release a session that must leave no trace (a rolled-back child): no final flush."""
        try:
            self.sessions.discard(session)
        finally:
            self._unannounce(session)

    def _unannounce(self, session: Any) -> None:
        """``dsh_session_disposed``, once per announced activation of ``session``."""
        session_id: str = session.id
        if self._announced.get(session_id) is session:
            del self._announced[session_id]
            self.plugins.notify("dsh_session_disposed", host=self, session=session)
