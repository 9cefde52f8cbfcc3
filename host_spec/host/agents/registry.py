"""The agent registry: builds, publishes and disposes agents; the identity authority.

``registry.get(id) is agent`` tells a live agent from a stale reference. What the
app learns about agents goes through :class:`~host_spec.host.agents.runtime.AgentHooks`
(re-exported here with the runtime the agents share).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from host_spec.carry import CarriedFolds
from host_spec.errors import DshError
from host_spec.records import CancelCause

from host_spec.host.agents.agent import Agent, AgentFold
from host_spec.host.agents.runtime import AgentHooks, AgentRuntime, NullHooks
from host_spec.host.agents.scope import Scope

if TYPE_CHECKING:
    from host_spec.protocols import Session

__all__ = ["AgentHooks", "NullHooks", "AgentRuntime", "AgentRegistry", "AgentExistsError"]

log = structlog.get_logger(__name__)


class AgentExistsError(DshError):
    """A live agent already drives this session."""

    code = "AGENT_EXISTS"


class AgentRegistry:
    """Live agents by id (implements ``protocols.AgentRegistry``)."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime
        self._agents: dict[str, Agent] = {}
        #: Folds of disposed agents: a continuable child woken again continues them (no history re-read).
        self._carried: CarriedFolds[AgentFold] = CarriedFolds()

    def create(
        self, session: Session, *, name: str, model: str | None = None, source: str = "startup",
        role: str | None = None,
    ) -> Agent:
        """Build, publish and (if it has pending work) wake an agent for ``session``.

        Construction closes a crash-interrupted turn and rebuilds the inbox. The agent
        is registered before ``hooks.created`` so plugins may already look it up; a veto
        unregisters it, disposes its scope and propagates. A resumed agent with
        pending inbox items starts working at once (cold resume continues work).

        Raises:
            AgentExistsError: a live agent already drives this session.
        """
        if session.id in self._agents:
            raise AgentExistsError(f"agent {session.id} is already live", agent_id=session.id)
        scope = Scope(label=f"agent:{session.id}")
        carried = self._carried.take(session.header, session.events)
        agent = Agent(
            self.runtime,
            self.dispose,
            session,
            scope,
            name=name,
            model=model,
            role=role,
            resumed=source == "resume",
            carried=carried,
        )
        self._agents[agent.id] = agent
        try:
            self.runtime.hooks.created(agent)
        except BaseException:
            del self._agents[agent.id]
            scope.dispose()
            agent.mark_disposed()
            raise
        try:
            self.runtime.hooks.session_start(agent, source)
        except Exception:
            log.exception("session_start hook failed", agent=agent.id)
        if agent.inbox.has_pending():
            agent.wake()
        return agent

    def get(self, agent_id: str) -> Agent | None:
        return self._agents.get(agent_id)

    def list(self) -> Sequence[Agent]:
        """Live agents in creation order."""
        return list(self._agents.values())

    def roots(self) -> Sequence[Agent]:
        """Live agents whose session has no parent."""
        return [agent for agent in self._agents.values() if agent.parent_id is None]

    async def dispose(self, agent: Agent) -> None:
        """Stop ``agent`` and unwind it; idempotent (concurrent callers share one disposal).

        Order: ``cancel(disposed)`` keeping the inbox (pending work stays durable for a
        later resume) -> ``when_idle`` -> scope disposal (LIFO) -> ``hooks.disposed`` ->
        unregister. The session is the caller's to flush and detach.
        """
        if agent._disposal is None:
            # Synchronous start: from here on sends are recorded but never wake the agent.
            agent.mark_disposing()
            agent.cancel(CancelCause("disposed"))
            agent._disposal = asyncio.ensure_future(self._finish_disposal(agent))
        await asyncio.shield(agent._disposal)

    async def _finish_disposal(self, agent: Agent) -> None:
        await agent.when_idle()
        agent.scope.dispose()
        try:
            self.runtime.hooks.disposed(agent)
        except Exception:
            log.exception("disposed hook failed", agent=agent.id)
        if self._agents.get(agent.id) is agent:
            del self._agents[agent.id]
        agent.mark_disposed()
        session = agent.session
        self._carried.keep(session.header, session.events, session.last_seq, agent.fold())
