"""The continuation manager: continuable children that sleep on disk and wake on mail.

A continuable child is one durable session with **at most one resident
activation** at a time. It is created once (:meth:`ContinuationManager.start_continuable`),
released when it settles (idle, owning no resident children, nothing accepted
but unclaimed), and cold-resumed from its log by the next delivery. Everything
that touches one child -- creation, routing a delivery, cold resume, the
settlement decision -- runs under that child's lock, so concurrent deliveries
never build two agents for one session.

Authority is structural, never claimed: only the exact live direct parent
(``host.agents.get(parent.id) is parent`` and the child's *persisted* header
names it) may deliver to a child; an interrupt needs an exact live ancestor.
Message ``source`` is recorded as given and grants nothing.

Layers: :mod:`~host_spec.host.children.residency` (activations, settlement watcher, child-first
release, notices, quiescence) <- :mod:`~host_spec.host.children.authority` (routing, cold
resume, interrupt, drain) <- this module (providers, ids, start, delivery).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any, Literal

import structlog

from host_spec.errors import SessionExistsError, SessionLockedError, SubagentError
from host_spec.events import EventType, SubagentDescriptor
from host_spec.messages import ContentBlock, Source, UserMessage, new_message_id, user_source
from host_spec.records import AbortSignal, Handle

from host_spec.host.children.activation import DESCRIPTOR_VERSION, fold_descriptor
from host_spec.host.children.authority import Lineage, check_content, check_signal, denied
from host_spec.host.store.context import cause_scope
from host_spec.host.children.directory import ChildInfo
from host_spec.host.children.providers import ForkProvider, ProviderRegistry, SpawnProvider

if TYPE_CHECKING:
    from host_spec.host.agents.agent import Agent as LiveAgent
    from host_spec.protocols import Agent, ContinuableProvider

__all__ = ["ContinuationManager", "fold_descriptor"]

log = structlog.get_logger(__name__)

_MODES = ("steer", "followup")


class ContinuationManager(Lineage):
    """Continuable children of one host (implements ``protocols.Continuations``).

    Args:
        host: The app host: ``sessions``, ``agents``, ``create_session``,
            ``resume_session``, ``start_agent``, ``dispose_agent`` and
            ``discard_session`` (release without writing) are used.
        settlement_notices: Tell a parent (``subagent-settled`` notice) when a child it
            delivered to settles. One-shot tools turn it off per start.

    The ``spawn`` and ``fork`` providers are registered here, by the host itself, so
    a profile that disables the legacy delegation tools still has them.
    """

    def __init__(self, host: Any, *, settlement_notices: bool = True) -> None:
        super().__init__(host, settlement_notices=settlement_notices)
        self._providers = ProviderRegistry()
        self._reserved: set[str] = set()
        self._builtins = [self._providers.register(SpawnProvider()), self._providers.register(ForkProvider())]

    # ------------------------------------------------------------ providers and ids

    def register_provider(self, provider: ContinuableProvider) -> Handle:
        """Register a provider by its ``name`` (``DUPLICATE_PROVIDER`` when taken)."""
        return self._providers.register(provider)

    def provider_names(self) -> list[str]:
        return self._providers.names()

    def new_child_id(self) -> str:
        """A fresh child id for a caller to reserve (a UUID; collisions are rejected at start)."""
        return f"child-{uuid.uuid4()}"

    def check_model(self, spec: str) -> None:
        """See :meth:`host_spec.protocols.Continuations.check_model` (the adapter is kept for the child's first step)."""
        self._host.models.check(spec)

    def fold_descriptor(self, events: Any) -> SubagentDescriptor | None:
        """See :func:`host_spec.host.children.activation.fold_descriptor` (offered to plugins via the protocol)."""
        return fold_descriptor(events)

    def is_resident(self, child_id: str) -> bool:
        """Whether ``child_id`` has a live activation that is not being released."""
        act = self._activations.get(child_id)
        return act is not None and act.releasing is None

    # ------------------------------------------------------------ start

    async def start_continuable(
        self,
        *,
        child_id: str,
        provider: str,
        label: str,
        prompt: list[ContentBlock],
        parent: Agent,
        signal: AbortSignal | None = None,
        name: str | None = None,
        notify: bool = True,
        model: str | None = None,
        cwd: str | None = None,
        role: str | None = None,
    ) -> tuple[str, str]:
        """Create a child and durably admit its first prompt.

        ``model``: the child's model spec (kept in its descriptor, so a cold resume uses
        it again); ``None``: the profile's ``[models]`` pattern, else the parent's.
        ``cwd``: the child's workspace root (its header's ``cwd``, so a cold resume
        acts there again); ``None``: the parent's. ``role``: the role it was spawned with
        (kept in its descriptor; its agent's ``role``, which the sandbox's
        ``[sandbox.roles]`` table keys on).

        Order: descriptor (``subagent/descriptor`` v2) -> agent -> the prompt enters the
        next-turn inbox (source ``{"kind": "user"}``) -> flush of the child session ->
        the child wakes. Returns ``(child_id, message_id)`` only then. Any failure before acceptance disposes the
        agent and discards the never-written session, and returns neither id.

        Args:
            name: The child's agent name (default ``label``); kept in the descriptor.
            notify: Whether the parent gets a settlement notice for this first epoch.

        Raises:
            SubagentError: ``INVALID_ARGUMENT``, ``PARENT_UNAVAILABLE``, ``DRAINING``,
                ``NO_PROVIDER``, ``DUPLICATE_CHILD`` or ``CANCELLED``.
        """
        if not isinstance(child_id, str) or not child_id.strip():
            raise SubagentError("child_id must be a non-empty string", code="INVALID_ARGUMENT")
        if not isinstance(label, str) or not label.strip():
            raise SubagentError("label must be a non-empty string", code="INVALID_ARGUMENT")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise SubagentError("name must be a non-empty string", code="INVALID_ARGUMENT")
        blocks = check_content(prompt, "prompt")
        self._check_live(parent, code="PARENT_UNAVAILABLE")
        self._check_admission(parent)
        chosen = self._providers.get(provider)
        if child_id in self._reserved or self._host.sessions.exists(child_id):
            raise SubagentError(f"child id {child_id} is already in use", code="DUPLICATE_CHILD", child_id=child_id)
        check_signal(signal, "start_continuable")
        self._reserved.add(child_id)
        self._busy += 1
        try:
            async with self._lock(child_id):
                self._check_live(parent, code="PARENT_UNAVAILABLE")
                self._check_admission(parent)
                return await self._materialize(child_id, chosen, label, name, blocks, parent, signal, notify, model,
                                               cwd, role)
        finally:
            self._reserved.discard(child_id)
            self._busy -= 1
            self._changed()

    async def _materialize(
        self,
        child_id: str,
        provider: ContinuableProvider,
        label: str,
        name: str | None,
        prompt: list[ContentBlock],
        parent: Agent,
        signal: AbortSignal | None,
        notify: bool,
        model: str | None = None,
        cwd: str | None = None,
        role: str | None = None,
    ) -> tuple[str, str]:
        header = parent.session.header
        seed = provider.prepare(parent)
        try:
            session = await self._host.create_session(
                child_id,
                parent_session=parent.id,
                seed=seed,
                origin="subagent",
                cwd=header.cwd if cwd is None else cwd,
                delegation_depth=header.delegation_depth + 1,
            )
        except (SessionExistsError, SessionLockedError) as exc:  # created meanwhile, e.g. by another process
            raise SubagentError(f"child id {child_id} is already in use", code="DUPLICATE_CHILD") from exc
        agent = None
        accepted = False
        model = model or self._host.member_model(name or label, parent)
        try:
            descriptor = SubagentDescriptor(
                version=DESCRIPTOR_VERSION,
                mode="continuable",
                provider=provider.name,
                label=label,
                agent_model=model,
                name=name,
                role=role,
            )
            session.append(EventType.SUBAGENT_DESCRIPTOR, descriptor)
            with cause_scope(None):  # the child's driver must not inherit the caller's tool-call cause
                agent = self._host.start_agent(session, name=name or label, model=model, source="startup", role=role)
            check_signal(signal, "start_continuable")
            # Admit without waking: the first turn starts only once the prompt is durable, so
            # a rolled-back start never has a driver writing behind it.
            message = UserMessage(id=new_message_id(), content=prompt, source=user_source())
            agent.inbox.insert(message, "next-turn")
            flush = asyncio.ensure_future(session.flush())
            try:
                await asyncio.shield(flush)
            except asyncio.CancelledError:
                # Acceptance is already in flight and cannot be recalled: finish it, keep the
                # child if it landed (it is durable and resumable), then honour the cancel.
                await asyncio.gather(flush, return_exceptions=True)
                if not flush.cancelled() and flush.exception() is None:
                    accepted = True
                    self._accepted(agent, parent, provider.name, label, name, notify)
                raise
        except BaseException:
            if not accepted:
                await self._rollback(session, agent)
            raise
        self._accepted(agent, parent, provider.name, label, name, notify)
        return child_id, message.id

    def _accepted(self, agent: LiveAgent, parent: Agent, provider: str, label: str, name: str | None, notify: bool) -> None:
        """The prompt is durable: make the child resident and let it start working."""
        self._activate(agent, parent.id, provider, label, agent.session.header.seed_length, notify)
        self.directory.note(ChildInfo(agent.id, parent.id, label, name or label, provider))
        agent.wake()
        log.info("subagent.started", child=agent.id, parent=parent.id, provider=provider)

    async def _rollback(self, session: Any, agent: Agent | None) -> None:
        """Undo a start that never reached acceptance: nothing resumable may remain."""
        try:
            if agent is not None:
                await self._host.agents.dispose(agent)
        finally:
            await self._host.discard_session(session)

    # ------------------------------------------------------------ delivery

    async def deliver(
        self,
        parent: Agent,
        child_id: str,
        content: list[ContentBlock],
        *,
        source: Source,
        mode: Literal["steer", "followup"] = "steer",
        message_id: str | None = None,
        signal: AbortSignal | None = None,
        notify: bool = True,
    ) -> str:
        """Host-only delivery to an exact direct child; returns the message id once durable.

        ``steer``: a running child gets it at its next step boundary, an idle one starts
        a turn; ``followup``: it becomes a later turn's prompt. A child that is not
        resident is cold-resumed first (its durable pending inbox is worked off too, in
        order). The message keeps ``source`` exactly. A ``message_id`` already pending
        in the child's inbox is not queued twice. ``notify``: whether the parent gets a
        ``subagent-settled`` notice when the child next settles.

        Raises:
            SubagentError: ``INVALID_ARGUMENT``, ``UNAUTHORIZED`` (not the exact live direct
                parent), ``NOT_RESUMABLE``, ``DRAINING`` or ``CANCELLED``. Nothing is written.
        """
        if mode not in _MODES:
            raise SubagentError(f"mode must be 'steer' or 'followup', not {mode!r}", code="INVALID_ARGUMENT")
        blocks = check_content(content, "content")
        if not isinstance(source, dict) or not isinstance(source.get("kind"), str):
            raise SubagentError("source must be an object with a string kind", code="INVALID_ARGUMENT")
        if message_id is not None and (not isinstance(message_id, str) or not message_id):
            raise SubagentError("message_id must be a non-empty string", code="INVALID_ARGUMENT")
        self._check_live(parent, code="UNAUTHORIZED")
        if child_id == parent.id:
            raise denied(f"agent {parent.id} cannot deliver to itself")
        self._check_admission(parent)
        check_signal(signal, "delivery")
        self._busy += 1
        try:
            async with self._lock(child_id):
                act = await self._route(parent, child_id, signal)
                # Re-checked after the awaits of a cold resume, with no await until the send.
                self._check_live(parent, code="UNAUTHORIZED")
                self._check_admission(parent)
                message = UserMessage(id=message_id or new_message_id(), content=blocks, source=dict(source))
                agent = act.agent
                delivered = agent.steer(message) if mode == "steer" else agent.followup(message)
                act.notify = act.notify or (notify and self.settlement_notices)
                act.poke()
            await agent.session.flush()
            return delivered
        finally:
            self._busy -= 1
            self._changed()

    async def wake(self, parent: Agent, child_id: str) -> Agent:
        """Make a stored direct child resident without delivering anything (a bare cold resume).

        The reloaded child closes a turn a crash left open and starts on its durable
        pending inbox at once. ``dsh resume`` uses it to continue children with work
        (:mod:`host_spec.host.resume`); a resident child is returned as is.

        Raises:
            SubagentError: ``UNAUTHORIZED``, ``NOT_RESUMABLE`` or ``DRAINING``, as :meth:`deliver`.
        """
        self._check_live(parent, code="UNAUTHORIZED")
        self._check_admission(parent)
        self._busy += 1
        try:
            async with self._lock(child_id):
                act = await self._route(parent, child_id, None)
                act.poke()
            return act.agent
        finally:
            self._busy -= 1
            self._changed()
