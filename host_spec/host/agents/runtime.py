"""What every agent of one host shares, and the seam through which the app observes agents.

Agents never import pluggy: the app implements :class:`AgentHooks` (turning each
call into a ``dsh_agent_*`` hook) and tests use a recording stub. The hooks see
agents through the contract's :class:`~host_spec.protocols.Agent`, so this module
needs nothing of the concrete agent (which imports it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import attrs

from host_spec.host.agents.window import CompactionSettings

if TYPE_CHECKING:
    from host_spec.protocols import Agent, ModelAdapter

    from host_spec.host.agents.prompt import PromptRegistry
    from host_spec.host.agents.tools import ToolRegistry
    from host_spec.host.store.sessions import SessionStore

__all__ = ["AgentHooks", "NullHooks", "AgentRuntime"]


class AgentHooks(Protocol):
    """What the app learns about agents (``app.Host`` implements it)."""

    def created(self, agent: Agent) -> None:
        """The agent is built and registered; raise to veto (creation is rolled back)."""

    def session_start(self, agent: Agent, source: str) -> None:
        """The agent may now be driven (``source`` is ``startup`` or ``resume``)."""

    def status(self, agent: Agent, status: str) -> None:
        """The live status changed (never repeats)."""

    def turn_end(self, agent: Agent, turn: int, reason: dict[str, Any]) -> None:
        """A turn was closed with ``reason``."""

    def admit_step(self, agent: Agent, turn: int, step: int) -> None:
        """Model call ``step`` of turn ``turn`` is about to start; raise to refuse it."""

    def disposed(self, agent: Agent) -> None:
        """The agent is quiescent and its scope unwound."""

    def brief(self, agent: Agent) -> str:
        """The text to add last to a compacted or cold-resumed agent's context (``""``: none)."""
        ...


class NullHooks:
    """Hooks that do nothing (tests and benchmarks)."""

    def created(self, agent: Agent) -> None:
        pass

    def session_start(self, agent: Agent, source: str) -> None:
        pass

    def status(self, agent: Agent, status: str) -> None:
        pass

    def turn_end(self, agent: Agent, turn: int, reason: dict[str, Any]) -> None:
        pass

    def admit_step(self, agent: Agent, turn: int, step: int) -> None:
        pass

    def disposed(self, agent: Agent) -> None:
        pass

    def brief(self, agent: Agent) -> str:
        return ""


@attrs.define
class AgentRuntime:
    """The services every agent of one host shares (``compaction``: when contexts are compacted)."""

    sessions: SessionStore | None
    tools: ToolRegistry
    prompts: PromptRegistry
    model: ModelAdapter
    hooks: AgentHooks = attrs.Factory(NullHooks)
    compaction: CompactionSettings = attrs.Factory(CompactionSettings)
