"""What the turn driver needs of an agent: the contract's agent plus its driver hooks.

The driver (:mod:`.loop`, :mod:`.tool_step`) is started by the agent it drives, so it
names the agent by this Protocol rather than by the concrete class: the two modules
then depend in one direction only (the agent on its driver).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from host_spec.protocols import Agent

if TYPE_CHECKING:
    from host_spec.records import AbortSignal, CancelCause

    from host_spec.host.agents.context import Conversation
    from host_spec.host.agents.inbox import Inbox
    from host_spec.host.agents.repair import HeldCall
    from host_spec.host.agents.runtime import AgentRuntime

__all__ = ["DrivenAgent"]


class DrivenAgent(Agent, Protocol):
    """An agent as its driver sees it (:class:`host_spec.host.agents.agent.Agent` is one).

    Attributes:
        runtime: The services every agent of the host shares.
        turn: The number of the last turn started (the driver advances it).
    """

    runtime: AgentRuntime
    turn: int
    #: ``(turn, step, calls)`` of an open turn whose calls wait on a permission ask (see ``repair``).
    held: tuple[int, int, tuple[HeldCall, ...]] | None

    @property
    def inbox(self) -> Inbox:
        """The agent's two queues, with the claim operations the driver uses."""
        ...

    @property
    def signal(self) -> AbortSignal:
        """The current activity's abort signal."""
        ...

    @property
    def cancel_cause(self) -> CancelCause | None:
        """Why the current activity was cancelled, if it was."""
        ...

    @property
    def conversation(self) -> Conversation:
        """The model context folded from the session (compactions applied)."""
        ...

    @property
    def resumed(self) -> bool:
        """This activation was cold-resumed from a stored log."""
        ...

    def take_latch(self) -> bool:
        """Consume a latched wake (arming a fresh signal); ``False`` when none."""
        ...

    def driver_done(self) -> None:
        """The driver task is ending; the agent becomes idle."""
        ...

    def messages(self) -> Sequence[Mapping[str, Any]]:
        """The model conversation derived from the session's events."""
        ...
