"""The services a host offers plugins, as ``typing.Protocol`` seams.

The live-object Protocols (``Session``, ``Agent``, ``Scope``, ``Inbox`` ...) are
defined in :mod:`host_spec.live` and re-exported here, so this module can stand on
the records that name them. Plugins (``dsh_team``, ``dsh_team_tools``,
``dsh_team_invariant``) import only this module, :mod:`host_spec.records`,
:mod:`host_spec.events`, :mod:`host_spec.messages` and :mod:`host_spec.errors`;
never the reference host. Any host that offers these
services can run the plugins unchanged.

Identity rule: a live object is the credential. ``host.agents.get(id) is agent``
tells a live agent from a stale copy or a disposed handle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from host_spec.live import Agent, AgentRegistry, AgentStatus, Inbox, PersistedSession, Scope, Session, SessionStore

if TYPE_CHECKING:
    from typing_extensions import TypeForm

    from host_spec.events import Event, SubagentDescriptor
    from host_spec.messages import ContentBlock, Source
    from host_spec.lifetime import AbortSignal, Handle
    from host_spec.records import PromptSection, ToolSpec

__all__ = [
    "AgentStatus",
    "Session",
    "PersistedSession",
    "SessionStore",
    "Scope",
    "Inbox",
    "Agent",
    "AgentRegistry",
    "ToolRegistry",
    "PromptRegistry",
    "ModelAdapter",
    "ModelRequest",
    "ContinuableProvider",
    "Continuations",
    "PluginContext",
    "Host",
]

#: The type of a service: what ``ctx.provide`` publishes and ``host.service`` returns.
S = TypeVar("S")


class ToolRegistry(Protocol):
    """Global and per-scope tool layers; a scope layer shadows a same-named global tool."""

    def register(self, spec: ToolSpec, *, scope: Scope | None = None) -> Handle:
        """Register ``spec`` globally or into ``scope``.

        Raises:
            RegistrationError: the name already exists in that same layer.
        """
        ...

    def visible(self, agent: Agent) -> Sequence[ToolSpec]:
        """Tools the agent can use now (scope layer over global, ``available`` applied)."""
        ...

    def restrict(self, scope: Scope, allowed: Collection[str]) -> Handle:
        """Let the agent of ``scope`` see and call only tools named in ``allowed``, until disposed.

        A role's tool allowlist: the other tools are neither offered to its model nor
        callable (``UNKNOWN_TOOL``). One restriction per scope; a later one replaces it.
        """
        ...


class PromptRegistry(Protocol):
    def register(self, section: PromptSection, *, scope: Scope | None = None) -> Handle: ...

    def render(self, agent: Agent) -> str:
        """The assembled system prompt for ``agent``."""
        ...


class ModelRequest(Protocol):
    """One step's input to a model adapter (read-only: an adapter never edits the request)."""

    @property
    def agent(self) -> Agent: ...

    @property
    def system(self) -> str: ...

    @property
    def messages(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def tools(self) -> Sequence[ToolSpec]: ...

    @property
    def purpose(self) -> str:
        """``"step"`` (an agent's step) or ``"compaction"`` (summarise the conversation; no tools)."""
        ...


class ModelAdapter(Protocol):
    """Produces one assistant step: ``{"text": str, "tool_calls": [{"id", "name", "arguments"}]}``.

    An adapter may report its model's context window as an ``int`` attribute
    ``context_window`` (tokens); the host compacts a context that nears it.
    """

    async def complete(self, request: ModelRequest) -> Mapping[str, Any]: ...


class ContinuableProvider(Protocol):
    """Prepares a continuable child's creation data; never sees the child agent."""

    @property
    def name(self) -> str: ...

    def prepare(self, parent: Agent) -> Sequence[Event]:
        """The inherited seed for the child (empty for a fresh child)."""
        ...


class Continuations(Protocol):
    """Continuable children: start, deliver (host-only Steer), interrupt, drain."""

    def register_provider(self, provider: ContinuableProvider) -> Handle: ...

    def new_child_id(self) -> str: ...

    def check_model(self, spec: str) -> None:
        """Refuse, before anything exists, a child ``model`` spec this host cannot serve.

        Lets a caller that records a child before starting it (a Team's member
        record) refuse a typo such as ``nosuch:thing`` without creating a member that
        could only fail its first turn.

        Raises:
            DshError: the spec's error (``MODEL_UNKNOWN``, ``MODEL_LOAD_FAILED``,
                ``MODEL_SPEC_INVALID``, ``MODEL_AUTH`` ...; ``EXTRA_NOT_INSTALLED`` for a
                kind whose extra is missing).
        """
        ...

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
        """Create the child and durably admit its first prompt; returns ``(child_id, message_id)``.

        ``model`` is the child's model spec (``None``: the host chooses, e.g. the parent's).
        ``role`` is the name of the role the child was spawned with (``None``: none),
        kept in its descriptor and shown as its agent's ``role``: the host keys its
        own per-role settings on it (the reference host: the sandbox policy of
        ``[sandbox.roles."NAME"]``). Only the host's configuration gives a role
        anything here, so naming a role never widens what a child may do beyond
        what the user wrote down.
        ``cwd`` is the child's workspace root, recorded in its header (``None``: the
        parent's); everything it does in the workspace -- file tools, shell, checks,
        sandbox -- happens there, and its own children inherit it.

        ``name`` is the child's agent name (default: ``label``); it is kept in the
        descriptor so a cold resume restores it. ``notify=False``: the parent gets no
        ``subagent-settled`` notice for this first epoch. A failure before the prompt
        is accepted rolls everything back and raises.
        """
        ...

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
        """Host-only delivery to an exact direct child, cold-resuming it when not loaded.

        Returns the message id once the child's inbox durably holds it. ``notify``:
        whether the parent gets a ``subagent-settled`` notice when the child settles.
        """
        ...

    def interrupt(self, child_id: str, authority: Agent) -> None:
        """Cancel the child's current turn keeping its inbox (``UNAUTHORIZED`` for strangers)."""
        ...

    async def drain(self, parent: Agent, child_ids: Sequence[str], *, keep_inbox: bool = False) -> None:
        """Release those children and their descendants, child-first (current turns cancelled).

        Their pending inbox items are discarded, unless ``keep_inbox`` keeps them
        durable for a later cold resume.
        """
        ...

    def is_resident(self, child_id: str) -> bool: ...

    def fold_descriptor(self, events: Sequence[Event]) -> SubagentDescriptor | None:
        """The first ``subagent/descriptor`` of ``events`` (pass ``own_events()``), or ``None``.

        ``None`` also for another descriptor version; a malformed version-2 payload
        raises ``SubagentError`` (``INVALID_DESCRIPTOR``).
        """
        ...


class PluginContext(Protocol):
    """What a plugin gets on load: its config, the host, and an ownership ledger.

    A plugin keeps per-host state in objects it registers here (pytest's way with
    stateful plugins): the plugin module's ``dsh_plugin_loaded`` builds them for
    *this* host and calls :meth:`register`, so a module loaded into several hosts
    shares nothing between them and needs no table keyed by host.
    """

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> Mapping[str, Any]: ...

    @property
    def host(self) -> Host: ...

    def own(self, handle: Handle) -> Handle:
        """Put ``handle`` in this plugin's ledger (disposed LIFO on unload or reload)."""
        ...

    def spawn(self, coro: Awaitable[Any], *, name: str = "") -> Any:
        """Run a supervised background task, cancelled on unload."""
        ...

    def register(self, plugin: object, *, name: str | None = None) -> Handle:
        """Register ``plugin``'s ``@hookimpl`` methods with this host, owned by this plugin.

        The object's hooks are called like the module's: a veto names this plugin,
        ``dsh_plugin_teardown`` and ``dsh_plugin_unload`` reach it on unload, and the
        returned handle (in the ledger) unregisters it. ``dsh_plugin_loaded`` is the
        module's alone (the object is built inside it), so an object may not implement it.

        Args:
            plugin: Any object with ``@hookimpl`` methods (``self`` plus any subset of the
                spec's arguments).
            name: Distinguishes several objects of one class (default: the class name).

        Raises:
            PluginError: an invalid hook (as for a plugin module), or the name is taken.
        """
        ...

    def provide(self, api: TypeForm[S], service: S) -> Handle:
        """Publish ``service`` as the implementation of ``api`` until unload.

        ``api`` is a class or a Protocol; callers get the service back, typed, with
        ``host.service(api)``. The key is the type's import path (module and
        qualified name), so a caller still holding the ``api`` class from before the
        providing plugin reloaded finds the new service.

        Raises:
            RegistrationError: another plugin already provides ``api``
                (``ALREADY_REGISTERED``), or ``service`` is not an instance of ``api``
                (``SERVICE_MISMATCH``; checked where ``isinstance`` can tell, i.e. a
                class or a ``@runtime_checkable`` Protocol).
        """
        ...


class Host(Protocol):
    """The services a host exposes to plugins (read-only: a plugin never replaces one)."""

    @property
    def sessions(self) -> SessionStore: ...

    @property
    def agents(self) -> AgentRegistry: ...

    @property
    def tools(self) -> ToolRegistry: ...

    @property
    def prompts(self) -> PromptRegistry: ...

    @property
    def continuations(self) -> Continuations: ...

    def service(self, api: TypeForm[S]) -> S:
        """The service another plugin provided for ``api`` with ``ctx.provide``.

        Look it up when you use it rather than keeping it: a reload of the
        providing plugin replaces the object.

        Raises:
            ServiceNotFoundError: no loaded plugin provides ``api`` (``SERVICE_NOT_FOUND``).
        """
        ...

    def find_service(self, api: TypeForm[S]) -> S | None:
        """:meth:`service`, or ``None`` while no loaded plugin provides ``api``."""
        ...

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Schedule ``fn`` after the current append/hook returns (observers must not re-enter)."""
        ...
