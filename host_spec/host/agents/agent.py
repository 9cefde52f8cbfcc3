"""A live agent: its session, scope and inbox, the wake/cancel state machine, and status.

The agent owns exactly one driver task at a time (:func:`loop.drive`). Sends are
synchronous: the inbox splice is appended before ``steer``/``followup`` return, so
the message is durable after the next flush whatever happens to the driver. A
waking send on an idle agent starts the driver; a running driver picks pending
items up at its next step or turn boundary.

Cancellation is modelled with one :class:`AbortSignal` per activity (asyncio
cancellation carries no reason). A cancel keeps the inbox by default; kept items
do not wake the driver until the next waking send, which is how an interrupted
teammate waits for new instructions instead of resuming the old ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from host_spec.errors import DshError
from host_spec.messages import UserMessage
from host_spec.records import AbortSignal, CancelCause

from host_spec.host.agents.context import Conversation
from host_spec.host.agents.inbox import NEXT_STEP, NEXT_TURN, Inbox, Target
from host_spec.host.agents.loop import drive
from host_spec.host.agents.repair import HeldCall, append_closers, fold_tail

if TYPE_CHECKING:
    from host_spec.protocols import AgentStatus, Session

    from host_spec.host.agents.runtime import AgentRuntime
    from host_spec.host.agents.scope import Scope

__all__ = ["Agent", "AgentDisposedError", "AgentFold"]

log = structlog.get_logger(__name__)


class AgentDisposedError(DshError):
    """A message was sent to an agent whose disposal has completed."""

    code = "AGENT_DISPOSED"


@attrs.frozen
class AgentFold:
    """An agent's folds of its log, carried to the next activation of the same session.

    Attributes:
        conversation: The model context folded so far (it knows how far).
        inbox: The inbox, the replay of every splice the activation saw.
    """

    conversation: Conversation
    inbox: Inbox


class Agent:
    """A live agent (implements ``protocols.Agent``); built by :class:`AgentRegistry`.

    Construction folds the log once: it closes a turn a crash left open, learns the
    last turn number, and rebuilds the inbox from the session's own splices. An
    agent built with ``carried`` (the :meth:`fold` of an earlier activation of the
    same session, whose log this one continues) folds only the events after it.
    """

    def __init__(
        self,
        runtime: AgentRuntime,
        release: Callable[[Agent], Awaitable[None]],
        session: Session,
        scope: Scope,
        *,
        name: str,
        model: str | None = None,
        role: str | None = None,
        resumed: bool = False,
        carried: tuple[int, AgentFold] | None = None,
    ) -> None:
        self.runtime = runtime
        self._release = release
        self._session = session
        #: The agent id (its session's id): a plain attribute, read many times per Team call.
        self.id: str = session.id
        self._scope = scope
        self._name = name
        self._model = model
        self._role = role
        self._status: AgentStatus = "idle"
        self._task: asyncio.Task[None] | None = None
        self._signal = AbortSignal()
        self._cause: CancelCause | None = None
        self._latch = False
        self._disposing = False
        self._disposed = False
        self._disposal: asyncio.Future[None] | None = None
        self._conversation = Conversation(session)
        self._resumed = resumed
        inbox: tuple[int, Inbox] | None = None
        if carried is not None:
            position, fold = carried
            self._conversation, inbox = fold.conversation, (position, fold.inbox)
            self._conversation.session = session
        state = fold_tail(session.events)
        self.repaired = append_closers(session, state, agent_id=session.id)
        self.turn = state.last_turn
        #: The open turn's calls whose permission ask was open when the host stopped:
        #: ``(turn, step, calls)``; the driver continues that turn first (see ``repair``).
        self.held: tuple[int, int, tuple[HeldCall, ...]] | None = None
        #: Their call ids: the permission gate asks again for these without a new ``asked`` mark.
        self.held_asks: frozenset[str] = frozenset(call.call_id for call in state.held)
        if state.held:
            self.held = (state.last_turn, state.step, tuple(state.held))
            self.repaired += len(state.held)  # the run continues (a resume notice wakes it)
        self._inbox = Inbox(session, inbox)

    def __repr__(self) -> str:
        return f"<Agent {self.id} {self._name!r} {self._status}>"

    # ------------------------------------------------------------ identity and state

    @property
    def session(self) -> Session:
        return self._session

    @property
    def status(self) -> AgentStatus:
        return self._status

    @property
    def model(self) -> str | None:
        return self._model

    @property
    def role(self) -> str | None:
        return self._role

    @property
    def name(self) -> str:
        return self._name

    @property
    def scope(self) -> Scope:
        return self._scope

    @property
    def inbox(self) -> Inbox:
        return self._inbox

    @property
    def conversation(self) -> Conversation:
        """The model context folded from the session (compactions applied)."""
        return self._conversation

    @property
    def resumed(self) -> bool:
        """This activation was cold-resumed from a stored log (not started fresh)."""
        return self._resumed

    @property
    def parent_id(self) -> str | None:
        return self._session.header.parent_session

    @property
    def disposing(self) -> bool:
        """Disposal has started: sends are still recorded but never wake the driver."""
        return self._disposing

    @property
    def disposed(self) -> bool:
        return self._disposed

    @property
    def signal(self) -> AbortSignal:
        """The current activity's abort signal (replaced when a new activity starts)."""
        return self._signal

    # ------------------------------------------------------------ sends

    def steer(self, message: UserMessage) -> str:
        """Deliver at the next step boundary of a running turn, or start a turn when idle."""
        return self._send(message, NEXT_STEP)

    def followup(self, message: UserMessage) -> str:
        """Queue ``message`` as a later turn's prompt and wake the agent."""
        return self._send(message, NEXT_TURN)

    def _send(self, message: UserMessage, target: Target) -> str:
        if self._disposed:
            raise AgentDisposedError(f"agent {self.id} is disposed", agent_id=self.id)
        if self._task is not None and self._signal.aborted:
            # The running activity is being cancelled: the message waits for a fresh
            # turn, and the wake is latched for when the driver settles.
            self._inbox.insert(message, NEXT_TURN)
            if not self._disposing:
                self._latch = True
            return message.id
        self._inbox.insert(message, target)
        self.wake()
        return message.id

    def wake(self) -> None:
        """Start the driver if idle (a running driver drains pending work itself)."""
        if self._disposing or self._task is not None:
            return
        self._signal, self._cause, self._latch = AbortSignal(), None, False
        self._set_status("running")
        self._task = asyncio.get_running_loop().create_task(drive(self), name=f"agent:{self.id}")

    # ------------------------------------------------------------ cancel and idle

    def cancel(self, cause: CancelCause, *, keep_inbox: bool = True) -> None:
        """Cancel the current activity (first cause wins); a no-op on an idle agent.

        Without ``keep_inbox`` the pending items are discarded first (durable
        ``canceled`` splices) and a latched wake is dropped.
        """
        if self._task is None:
            return
        if not keep_inbox:
            self._inbox.clear()
            self._latch = False
        if not self._signal.aborted:
            self._cause = cause
            self._signal.abort(cause)

    @property
    def cancel_cause(self) -> CancelCause | None:
        return self._cause

    async def when_idle(self) -> None:
        """Wait until no driver runs (looping: a settling driver may hand over to a new one)."""
        while self._task is not None:
            await asyncio.wait([self._task])

    def take_latch(self) -> bool:
        """Driver hook: consume a latched wake, arming a fresh signal. False when none or disposing."""
        if not self._latch or self._disposing:
            return False
        self._signal, self._cause, self._latch = AbortSignal(), None, False
        return True

    def driver_done(self) -> None:
        """Driver hook: the driver task is ending; the agent becomes idle."""
        self._task = None
        self._set_status("idle")

    def _set_status(self, status: AgentStatus) -> None:
        if status == self._status:
            return
        self._status = status
        try:
            self.runtime.hooks.status(self, status)
        except Exception:
            log.exception("agent status hook failed", agent=self.id, status=status)

    # ------------------------------------------------------------ conversation

    def messages(self) -> Sequence[Mapping[str, Any]]:
        """The model conversation derived from the surface events (inherited prefix included).

        Folded incrementally (each call only decodes events appended since the last one);
        a ``context/compacted`` event replaces the older turns by its summary.
        """
        return self._conversation.messages()

    def fold(self) -> AgentFold:
        """Hand what this agent folded from its log to the next activation of its session.

        The conversation moves without a copy; this agent starts its own from scratch
        should it be asked again (it is disposed: it never is in practice).
        """
        fold = AgentFold(self._conversation, self._inbox)
        self._conversation = Conversation(self._session)
        return fold

    # ------------------------------------------------------------ disposal

    async def dispose(self) -> None:
        """Dispose through the owner that built the agent (idempotent; the registry's ``dispose``)."""
        await self._release(self)

    def mark_disposing(self) -> None:
        self._disposing = True

    def mark_disposed(self) -> None:
        self._disposing = self._disposed = True
