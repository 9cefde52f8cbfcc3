"""A member as a worker sees it: its stored log up to a call's seq, and the events its tools record.

A worker runs a member's calls without the member's live agent (that lives in
the Lead's process). Model adapters and workspace tools read only a little of an
agent: its id, name and model; its session's header (the workspace), its events
(the scripted model's position, the stale-edit guard's read ledger), and they
record events through ``session.append``. A :class:`StandIn` gives them exactly
that: the member's log read from the store once and then incrementally, cut at
the seq the call was posted at, and an ``append`` that collects what a tool
records so the answer can carry it to the Lead's process, which writes it.

Collected events are kept per running call (a context variable), so calls of
one member that run side by side (concurrency-safe reads) never mix them.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

import msgspec

from host_spec.events import Event, SessionHeader
from host_spec.workspace import WriteAudit

from host_spec.host.agents.scope import Scope

__all__ = ["StandIn", "StandInSession", "Audits", "collecting", "judging"]

#: The events the running call's tool recorded (``None`` outside a call).
_collected: contextvars.ContextVar[list[tuple[str, Any]] | None] = contextvars.ContextVar("collected", default=None)
#: The write-scope verdicts the Lead sent with the running call.
_verdicts: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("verdicts", default=None)


def collecting() -> list[tuple[str, Any]]:
    """Start collecting the running call's recorded events; returns the list they land in."""
    collected: list[tuple[str, Any]] = []
    _collected.set(collected)
    return collected


def judging(audits: dict[str, Any] | None) -> None:
    """Make ``audits`` (path -> verdict) the running call's write-scope verdicts."""
    _verdicts.set(audits)


class StandInSession:
    """The member's stored log as a read-only session (see the module docstring).

    Args:
        header: The member's stored header (``cwd`` replaced by the worker's workspace, if it has one).
    """

    def __init__(self, header: SessionHeader) -> None:
        self.header = header
        self.id = header.id
        self.stored: list[Event] = []  # every event read so far
        self.cut = 0  # the seq the running calls were posted at
        self.live = True

    @property
    def events(self) -> Sequence[Event]:
        return self.stored[: self.cut]

    def own_events(self) -> Sequence[Event]:
        """Events after the inherited prefix (a fork's seed), as a live session's."""
        return self.stored[self.header.seed_length : self.cut]

    @property
    def last_seq(self) -> int:
        return self.cut

    @property
    def durable_seq(self) -> int:
        return self.cut

    def append(self, type: str, data: Any, *, cause: Any = None, write_ahead: bool = False) -> None:
        """Collect one event a tool records; the Lead's process appends it to the member's log."""
        collected = _collected.get()
        if collected is None:
            raise RuntimeError("a stand-in session records events only inside a call")
        collected.append((type, msgspec.to_builtins(data)))

    async def flush(self) -> None:
        """Nothing to flush: a stand-in writes nothing itself."""


class StandIn:
    """The member as an agent (id, name, model, role, session, a scope for tool lookups)."""

    def __init__(
        self, agent_id: str, name: str, model: str | None, session: StandInSession, role: str | None = None
    ) -> None:
        self.id = agent_id
        self.name = name
        self.model = model
        self.role = role
        self.session = session
        self.scope = Scope(f"stand-in {agent_id}")
        self.status = "running"
        self.disposed = False


class Audits:
    """The worker's write auditor: answers with the verdict the Lead's Team gave for the path."""

    def audit_write(self, agent: Any, path: str) -> WriteAudit | None:
        verdicts = _verdicts.get() or {}
        verdict = verdicts.get(path)
        return None if verdict is None else msgspec.convert(verdict, WriteAudit)
