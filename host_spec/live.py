"""The live objects a host hands plugins: sessions, agents, their scopes and inboxes.

These Protocols need only the event envelope, messages and the lifetime values, so
the contract's records (a tool call names its calling agent) can stand on them and
the service Protocols in :mod:`host_spec.protocols` on both. Import them from
:mod:`host_spec.protocols`, which re-exports every one.

Identity rule: a live object is the credential. ``host.agents.get(id) is agent``
tells a live agent from a stale copy or a disposed handle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from host_spec.events import Cause, Event, SessionHeader
    from host_spec.lifetime import CancelCause, Handle
    from host_spec.messages import UserMessage

__all__ = ["AgentStatus", "Session", "PersistedSession", "SessionStore", "Scope", "Inbox", "Agent", "AgentRegistry"]

AgentStatus = Literal["running", "idle"]



@runtime_checkable
class Session(Protocol):
    """A live session: an append-only event log with a durability barrier.

    ``append`` is synchronous: it assigns ``seq``/``time``, runs every
    ``dsh_pre_append`` impl (a violation raises ``InvariantError`` and writes
    nothing), makes the event visible in ``events``, then calls the
    ``dsh_session_event`` observers. ``flush`` makes everything appended so far
    durable; concurrent flushes of one session share one fsync (group commit).
    """

    @property
    def id(self) -> str: ...

    @property
    def header(self) -> SessionHeader: ...

    @property
    def events(self) -> Sequence[Event]:
        """Every event in order; ``events[i].seq == i + 1``. Read-only view."""
        ...

    @property
    def last_seq(self) -> int:
        """Seq of the newest event (0 for an empty log)."""
        ...

    @property
    def durable_seq(self) -> int:
        """Seq of the newest event known to be on stable storage."""
        ...

    @property
    def live(self) -> bool: ...

    def own_events(self) -> Sequence[Event]:
        """``events[header.seed_length:]``: the session's own work, without an inherited prefix."""
        ...

    def append(self, type: str, data: Any, *, cause: Cause | None = None, write_ahead: bool = False) -> Event:
        """Commit one event (durable after the next :meth:`flush`).

        ``write_ahead=True`` says the caller flushes right after this step: a host
        may start writing the event to storage at once, so the disk works while the
        event's observers run. The event is still durable only once a flush
        returns; it may survive a crash that comes before that flush (so may
        the events appended before it, which that flush covers too). Events
        appended without the hint, and none with it after them, are written only
        by a flush.
        """
        ...

    async def flush(self) -> None: ...


class PersistedSession(Protocol):
    """A read-only snapshot of a stored session (not activated, no repair written)."""

    @property
    def header(self) -> SessionHeader: ...

    @property
    def events(self) -> Sequence[Event]: ...

    def own_events(self) -> Sequence[Event]: ...


class SessionStore(Protocol):
    """Live sessions and read-only access to persisted ones."""

    def get(self, session_id: str) -> Session | None:
        """The live session with this id, or ``None``."""
        ...

    def list(self) -> Sequence[Session]:
        """Live sessions in creation order."""
        ...

    async def flush(self, session: Session) -> None: ...

    async def inspect(self, session_id: str) -> PersistedSession:
        """Read a stored session without activating it.

        Raises:
            SessionNotFoundError: nothing is stored under this id.
            SessionCorruptError: the committed region is unreadable.
        """
        ...

    def exists(self, session_id: str) -> bool:
        """Whether a session with this id is live or stored."""
        ...

    @property
    def durable(self) -> bool:
        """Whether a flushed session survives the process (``False`` for an in-memory store).

        Plugins whose guarantees rest on flushes (the Team service) refuse to run
        when this is ``False``.
        """
        ...


class Scope(Protocol):
    """A LIFO ledger of disposers that lives exactly as long as its owner (an agent)."""

    @property
    def disposed(self) -> bool: ...

    def add(self, handle: Handle) -> Handle:
        """Track ``handle``; it is disposed with the scope (in reverse order)."""
        ...


class Inbox(Protocol):
    """Pending messages of an agent, projected from durable ``agent/inbox/spliced`` events."""

    def pending(self) -> Sequence[UserMessage]:
        """Unclaimed messages, next-step items first, then next-turn items."""
        ...


class Agent(Protocol):
    """A live agent. ``id == session.id``; status is live only (never an event)."""

    @property
    def id(self) -> str: ...

    @property
    def session(self) -> Session: ...

    @property
    def status(self) -> AgentStatus: ...

    @property
    def model(self) -> str | None: ...

    @property
    def name(self) -> str:
        """Name used by the scripted model: ``lead`` for a root, else the child's label."""
        ...

    @property
    def role(self) -> str | None:
        """The role the agent was started with (``start_continuable(role=...)``); ``None``: none."""
        ...

    @property
    def scope(self) -> Scope: ...

    @property
    def inbox(self) -> Inbox: ...

    @property
    def disposed(self) -> bool: ...

    def steer(self, message: UserMessage) -> str:
        """Deliver at the next step boundary of a running turn, or start a turn when idle.

        The inbox splice is appended synchronously (durable after the next flush).
        Returns the message id.
        """
        ...

    def followup(self, message: UserMessage) -> str:
        """Queue as the next turn's prompt and wake the agent. Returns the message id."""
        ...

    def cancel(self, cause: CancelCause, *, keep_inbox: bool = True) -> None:
        """Cancel the current turn; a no-op on an idle agent."""
        ...

    async def when_idle(self) -> None:
        """Wait until the agent has no turn running and nothing waking it."""
        ...


class AgentRegistry(Protocol):
    def get(self, agent_id: str) -> Agent | None:
        """The exact live agent with this id, or ``None``."""
        ...

    def list(self) -> Sequence[Agent]: ...
