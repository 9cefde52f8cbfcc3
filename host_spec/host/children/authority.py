"""Who may reach which continuable child, and how a sleeping child is reached.

Authority is structural, never claimed: only the exact live direct parent
(``host.agents.get(parent.id) is parent`` and the child's *persisted* header
names it) may deliver to a child, and only an exact live ancestor may interrupt
one. A child that is not resident is reached by a cold resume: its stored header
is checked first (nothing is written for a stranger), its first own descriptor
must say ``continuable``, and the agent is rebuilt from the log alone -- through
no provider, under the name the descriptor recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import structlog

from host_spec.errors import SessionError, SessionNotFoundError, SubagentError
from host_spec.messages import ContentBlock
from host_spec.records import AbortSignal, CancelCause

from host_spec.host.children.activation import Activation, fold_descriptor
from host_spec.host.store.context import cause_scope
from host_spec.host.children.directory import ChildDirectory, ChildInfo
from host_spec.host.children.residency import Residency, aggregate

if TYPE_CHECKING:
    from host_spec.protocols import Agent

__all__ = ["Lineage", "check_signal", "check_content", "denied"]

log = structlog.get_logger(__name__)


def denied(message: str, **details: Any) -> SubagentError:
    return SubagentError(message, code="UNAUTHORIZED", **details)


def check_signal(signal: AbortSignal | None, what: str) -> None:
    if signal is not None and signal.aborted:
        raise SubagentError(f"{what} was cancelled: {signal.reason}", code="CANCELLED")


def check_content(content: Any, what: str) -> list[ContentBlock]:
    if not isinstance(content, list) or not content or not all(isinstance(b, dict) for b in content):
        raise SubagentError(f"{what} must be a non-empty list of content blocks", code="INVALID_ARGUMENT")
    return [dict(block) for block in content]


class Lineage(Residency):
    """Routing, cold resume, interrupt and drain over the activation table."""

    def __init__(self, host: Any, *, settlement_notices: bool = True) -> None:
        super().__init__(host, settlement_notices=settlement_notices)
        self.directory = ChildDirectory(host)

    async def _route(self, parent: Agent, child_id: str, signal: AbortSignal | None) -> Activation:
        """The child's activation, cold-resuming it when not resident (caller holds the lock)."""
        act = self._activations.get(child_id)
        if act is not None and act.releasing is not None:
            await asyncio.gather(asyncio.shield(act.releasing), return_exceptions=True)
            act = None
        if act is not None:
            if act.parent_id != parent.id:
                raise denied(f"{child_id} is not a direct child of {parent.id}", child_id=child_id)
            return act
        if self._host.agents.get(child_id) is not None:
            raise denied(f"{child_id} is not a continuable child of {parent.id}", child_id=child_id)
        return await self._cold_resume(parent, child_id, signal)

    async def _cold_resume(self, parent: Agent, child_id: str, signal: AbortSignal | None) -> Activation:
        try:
            stored = await self._host.sessions.inspect(child_id)
        except SessionNotFoundError:
            raise SubagentError(
                f"no stored subagent {child_id}; do not retry send_message with this id",
                code="NOT_RESUMABLE",
                child_id=child_id,
            ) from None
        except SessionError as exc:
            raise SubagentError(f"subagent {child_id} cannot be read: {exc}", code="NOT_RESUMABLE") from exc
        if stored.header.parent_session != parent.id:
            raise denied(f"{child_id} is not a direct child of {parent.id}", child_id=child_id)
        try:
            descriptor = fold_descriptor(stored.own_events())
        except SubagentError as exc:
            raise SubagentError(str(exc), code="NOT_RESUMABLE", child_id=child_id) from exc
        if descriptor is None or descriptor.mode != "continuable":
            raise SubagentError(
                f"{child_id} is not a continuable subagent; do not retry send_message with this id",
                code="NOT_RESUMABLE",
                child_id=child_id,
            )
        check_signal(signal, "delivery")
        self._check_live(parent, code="UNAUTHORIZED")
        self._check_admission(parent)
        try:
            session = await self._host.resume_session(child_id)
        except SessionError as exc:
            raise SubagentError(f"subagent {child_id} cannot be resumed: {exc}", code="NOT_RESUMABLE") from exc
        label = descriptor.label or child_id
        try:
            with cause_scope(None):
                agent = self._host.start_agent(
                    session, name=descriptor.name or label, model=descriptor.agent_model, source="resume",
                    role=descriptor.role,
                )
        except BaseException:
            await self._host.discard_session(session)
            raise
        log.info("subagent.resumed", child=child_id, parent=parent.id)
        self.directory.note(ChildInfo(child_id, parent.id, label, descriptor.name or label, descriptor.provider))
        return self._activate(agent, parent.id, descriptor.provider, label, session.last_seq, False)

    # ------------------------------------------------------------ interrupt and drain

    def interrupt(self, child_id: str, authority: Agent) -> None:
        """Cancel the child's current turn, keeping its inbox (synchronous).

        ``authority`` must be the exact live agent and one of the child's ancestors.
        An absent or releasing child is a no-op (authority is still checked first).

        Raises:
            SubagentError: ``UNAUTHORIZED``.
        """
        self._check_live(authority, code="UNAUTHORIZED")
        if child_id == authority.id:
            raise denied(f"agent {authority.id} cannot interrupt itself")
        target = self._host.agents.get(child_id)
        act = self._activations.get(child_id)
        if target is None or (act is not None and act.releasing is not None):
            return
        if authority.id not in self._ancestors(target):
            raise denied(f"{authority.id} is not an ancestor of {child_id}", child_id=child_id)
        target.cancel(CancelCause("parent", detail=f"interrupted by {authority.id}"), keep_inbox=True)
        log.info("subagent.interrupted", child=child_id, by=authority.id)

    def _ancestors(self, agent: Agent) -> list[str]:
        """Ids up the live lineage (a resident child's ancestors are always live)."""
        chain: list[str] = []
        parent_id = agent.session.header.parent_session
        while parent_id is not None and parent_id not in chain:
            chain.append(parent_id)
            parent = self._host.agents.get(parent_id)
            parent_id = parent.session.header.parent_session if parent is not None else None
        return chain

    async def drain(self, parent: Agent, child_ids: Sequence[str], *, keep_inbox: bool = False) -> None:
        """Release those resident direct children and their descendants, child-first.

        Their current turns are cancelled. Pending inbox items of the drained children
        are discarded (durably), unless ``keep_inbox``: then they stay durable and a
        later cold resume works them off (a Team never loses accepted mail). Absent
        ids are no-ops.

        Raises:
            SubagentError: ``UNAUTHORIZED`` (a stranger, or a resident child of another
                parent: nothing is released), ``ACTIVATION_TEARDOWN_FAILED``.
        """
        self._check_live(parent, code="UNAUTHORIZED")
        selected: list[Activation] = []
        for child_id in dict.fromkeys(child_ids):
            act = self._activations.get(child_id)
            if act is None:
                continue
            if act.parent_id != parent.id:
                raise denied(f"{child_id} is not a direct child of {parent.id}", child_id=child_id)
            selected.append(act)
        releases = [self._release(act, keep_inbox=keep_inbox, notice=False) for act in selected]
        results = await asyncio.gather(*(asyncio.shield(r) for r in releases), return_exceptions=True)
        aggregate(results, "drain")
