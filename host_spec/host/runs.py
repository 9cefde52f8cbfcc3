"""Runs: the host starts a root's agent, drives it to quiescence, and disposes agents child-first.

A run is a root session and its agent working off one prompt (:meth:`HostRuns.run`)
or a stored root picking up where a crash or an exit left it
(:meth:`HostRuns.resume`). Both end at quiescence (:meth:`HostRuns.quiesce`): no
agent is running, no work scheduled with ``call_soon`` is pending, and no
continuable child is still settling, because any of them may still wake another
agent. Only then is every session flushed.

Disposal goes child-first: an agent's resident continuable children are released
before the agent and again after it is idle (a tool it was still running may have
started one), and its session is released even when a step of that fails, so no
lock is left held.

:class:`HostRuns` is a part of :class:`host_spec.host.app.Host`: it holds no state
of its own and works on the host's registries, continuations and scheduled work.
"""

from __future__ import annotations

import asyncio
import fnmatch
from typing import TYPE_CHECKING, Any

from host_spec.events import EventType
from host_spec.messages import UserMessage, user_message

from host_spec.host.children.activation import fold_descriptor
from host_spec.host.resume import continue_run
from host_spec.host.session_activation import SessionActivation

if TYPE_CHECKING:
    from host_spec.host.agents.registry import AgentRegistry
    from host_spec.host.models.registry import ModelRoutes
    from host_spec.host.plugins.profiles import Profile

__all__ = ["HostRuns", "agent_name"]


class HostRuns(SessionActivation):
    """The host's agents and runs: start, dispose, run or resume to quiescence (a part of ``Host``).

    Attributes:
        agents: The live agents (set by the host).
        models: The host's model routes; a run's root gets the default spec.
        continuations: Continuable children, or ``None`` on a host without them.
        profile: The profile whose ``[models]`` patterns pick a child's model, if any.
    """

    agents: AgentRegistry
    models: ModelRoutes
    continuations: Any
    profile: Profile | None
    _soon_pending: int
    _soon_tasks: set[asyncio.Future[Any]]

    def start_agent(
        self, session: Any, *, name: str, source: str = "startup", model: str | None = None, role: str | None = None,
    ) -> Any:
        """Build and publish the agent of an announced session (``dsh_agent_created`` may veto)."""
        return self.agents.create(session, name=name, model=model, source=source, role=role)

    def member_model(self, name: str, parent: Any) -> str | None:
        """The model spec of a new child named ``name``: the profile's first matching
        ``[models]`` pattern (``fnmatch``), else its parent's model."""
        for pattern, spec in (self.profile.models.items() if self.profile is not None else ()):
            if fnmatch.fnmatchcase(name, pattern):
                return spec
        return getattr(parent, "model", None)

    async def dispose_agent(self, agent: Any) -> None:
        """Dispose ``agent`` (quiesce, unwind its scope) and release its session.

        Its resident continuable children are released first (child-first, inboxes kept).
        """
        try:
            if self.continuations is not None:
                await self.continuations.release_children(agent)
        finally:
            try:
                await self.agents.dispose(agent)
                if self.continuations is not None:
                    # A tool the agent was still running may have started a child after
                    # the first release; the agent is idle now, so nothing new can start.
                    await self.continuations.release_children(agent)
            finally:
                await self.release_session(agent.session)  # never leave the lock held

    async def run(
        self,
        prompt: str | UserMessage,
        *,
        name: str = "lead",
        session_id: str | None = None,
        cwd: str | None = None,
        session: Any = None,
    ) -> Any:
        """Create a root session and agent, give it ``prompt``, and wait until quiescent.

        Args:
            prompt: The user's task.
            name: The root agent's name (the scripted model's key).
            session_id: The root's id (default: a fresh ``session-<n>``).
            cwd: The absolute workspace directory, recorded in the session header (children
                inherit it, a resume reads it back); ``None``: no workspace tools.
            session: A root session already created (and locked) by the caller, used
                instead of creating one (``session_id`` and ``cwd`` are then ignored).

        Returns:
            The root agent (still live; ``close`` disposes it).
        """
        if session is None:
            session = await self.create_session(session_id, cwd=cwd)
        try:
            agent = self.start_agent(session, name=name, source="startup", model=self.models.default_spec)
        except BaseException:
            await self.release_session(session)
            raise
        agent.followup(prompt if isinstance(prompt, UserMessage) else user_message(prompt))
        await self.quiesce()
        return agent

    async def resume(self, session_id: str) -> Any:
        """Cold-resume a stored session's agent and wait until quiescent.

        The agent closes a turn a crash left open and works off its pending inbox;
        :func:`~host_spec.host.resume.continue_run` then restarts an interrupted turn
        (or retries one that ended with an error) and cold-resumes direct children that
        still have work.

        Raises:
            SessionNotFoundError: unknown session id.
            SessionLockedError: the session is live elsewhere.
        """
        session = await self.resume_session(session_id)
        try:
            agent = self.start_agent(session, name=agent_name(session), source="resume", model=self.models.default_spec)
        except BaseException:
            await self.release_session(session)
            raise
        failed = _last_turn_failed(agent.session.events)
        await continue_run(self, agent, interrupted=bool(agent.repaired), failed=failed)  # see host_spec.host.resume
        await self.quiesce()
        return agent

    async def quiesce(self) -> None:
        """Wait until every live agent is idle and no scheduled host work is pending; then flush."""
        while True:
            await asyncio.sleep(0)
            busy = [agent for agent in self.agents.list() if agent.status == "running"]
            if busy:
                await asyncio.gather(*(agent.when_idle() for agent in busy))
                continue
            if self._soon_pending or self._soon_tasks:
                await asyncio.gather(*self._soon_tasks, return_exceptions=True)
                continue
            if self.continuations is not None and not self.continuations.idle():
                await self.continuations.quiescent()  # settling children may still notify a parent
                continue
            break
        for session in list(self.sessions.list()):
            await session.flush()


def _last_turn_failed(events: Any) -> bool:
    """Whether the last ``turn/end`` of ``events`` has the reason kind ``error``."""
    for event in reversed(events):
        if event.type == EventType.TURN_END:
            return (event.value().get("reason") or {}).get("kind") == "error"
    return False


def agent_name(session: Any) -> str:
    """The scripted-model name of a session's agent: ``lead`` for a root, else its descriptor name or label.

    Raises:
        SubagentError: ``INVALID_DESCRIPTOR`` for a malformed version-2 descriptor.
    """
    if session.header.parent_session is None:
        return "lead"
    descriptor = fold_descriptor(session.own_events())
    return (descriptor and (descriptor.name or descriptor.label)) or session.id
