"""The reference host: wires sessions, agents, tools and prompts to the plugins.

:class:`Host` implements :class:`host_spec.protocols.Host` for plugins and the two
seams the lower layers expose without importing pluggy: ``SessionObserver``
(``pre_append`` / ``committed`` / ``flushed``) and ``AgentHooks`` (``created`` ...
``disposed``). Each seam call becomes one hook call through
:class:`~host_spec.host.plugins.manager.PluginManager`, which applies the veto/observer rules.
The seams run on every append and flush, so each is one direct call into the manager.

Session activation is the host's job because the store and the agent layer never
call hooks themselves: :meth:`Host.create_session` / :meth:`Host.resume_session`
announce a session (``dsh_session_created``, veto) *before* its agent is built, and
:meth:`Host.release_session` detaches it (final flush) and fires
``dsh_session_disposed``, exactly once per activation
(:mod:`host_spec.host.session_activation`). Starting agents, running a root to
quiescence and disposing agents child-first are in :mod:`host_spec.host.runs`.

Lifecycle: ``await Host.open(data_dir, profile, model)`` -> ``run`` / ``resume`` ->
``close()`` (plugins unload last-first with teardown, agents are disposed, sessions
get their final flush and release their locks). Logging goes through structlog; the
CLI configures it, never this module.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from host_spec.permissions import PermissionRouter
from host_spec.storage import StorageBackend

from host_spec.host.agents.registry import AgentRegistry, AgentRuntime
from host_spec.host.models.registry import ModelRoutes, resolve_spec
from host_spec.host.plugins.manager import PluginManager
from host_spec.host.plugins.profiles import Profile, load_profile
from host_spec.host.agents.prompt import PromptRegistry
from host_spec.host.runs import HostRuns
from host_spec.host.store.sessions import SessionStore
from host_spec.host.store.selection import open_backend
from host_spec.host.children.manager import ContinuationManager
from host_spec.host.agents.tools import ToolRegistry
from host_spec.host.sandbox.policy import SandboxSettings
from host_spec.host.sandbox.service import Sandbox

__all__ = ["Host", "resolve_model"]

if TYPE_CHECKING:
    from typing_extensions import TypeForm

log = structlog.get_logger(__name__)

S = TypeVar("S")


def resolve_model(model: Any) -> Any:
    """A model adapter from an adapter object or a spec string (``scripted:FILE``, ``openai:MODEL``).

    Specs resolve through entry-point group ``dsh.models``
    (:mod:`host_spec.host.models.registry`).

    Raises:
        ModelError: an unknown or uninstalled kind, or the adapter's own check
            (``ScriptError`` for a bad script, ``MODEL_AUTH`` for a missing key variable).
    """
    if not isinstance(model, (str, os.PathLike)):
        return model
    return resolve_spec(os.fspath(model))


class Host(HostRuns):
    """The reference host (implements ``protocols.Host``, ``SessionObserver``, ``AgentHooks``).

    Its session activations and runs are inherited from
    :class:`~host_spec.host.runs.HostRuns` (and its
    :class:`~host_spec.host.session_activation.SessionActivation`); the state they
    work on is built here.

    Attributes:
        sessions, agents, tools, prompts: The services plugins use.
        continuations: Continuable children, or ``None`` on a host without them.
        plugins: The plugin manager (hooks are called through it).
        profile: The profile whose plugins were loaded, if any.
    """

    def __init__(
        self,
        *,
        store: StorageBackend | None,
        model: Any,
        plugins: PluginManager | None = None,
        model_spec: str | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.store = store
        self.model = model
        self.models = ModelRoutes(model, model_spec)
        self.plugins = plugins if plugins is not None else PluginManager()
        self.plugins.host = self
        #: How members' commands are sandboxed; the workspace and MCP plugins find it as a service.
        self.sandbox = sandbox if sandbox is not None else Sandbox()
        self.plugins.services.provide("host", Sandbox, self.sandbox)
        self.sessions = SessionStore(store, self)
        self.tools = ToolRegistry(pre_call=self._tool_pre_call)
        self.prompts = PromptRegistry()
        self.agents = AgentRegistry(AgentRuntime(self.sessions, self.tools, self.prompts, self.models, hooks=self))
        self.continuations: Any = ContinuationManager(self)
        self.profile: Profile | None = None
        self._announced: dict[str, Any] = {}
        self._soon_pending = 0
        self._soon_tasks: set[asyncio.Future[Any]] = set()
        self._closed = False
        self._opened_store: Any = None  # the backend Host.open made; closed with the host
        self.placement: Any = None  # where members' work runs, on a shared store (host_spec.host.placement)

    # ------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls,
        data_dir: str | os.PathLike[str] | None,
        profile: str | os.PathLike[str] | Profile | None,
        model: Any,
        *,
        extra_plugins: Sequence[tuple[str, object]] = (),
        wrap_storage: Callable[[StorageBackend], StorageBackend] | None = None,
        run_data: str | os.PathLike[str] | None = None,
    ) -> Host:
        """Build a host and load its plugins.

        Args:
            data_dir: Root of the JSONL store, a shared store's URL (``postgresql://...``,
                :mod:`host_spec.host.store.selection`), or ``None`` to keep sessions in memory.
            profile: A built-in profile name, a ``.toml`` path, a :class:`Profile`, or ``None``.
            model: A model adapter or a spec string (``scripted:FILE``, ``openai:MODEL``).
                Members the profile's ``[models]`` table names get their own spec.
            extra_plugins: ``(name, object)`` plugins registered before the profile's,
                so they unload last (the CLI's transcript printer).
            wrap_storage: Called once with the JSONL store under ``data_dir``; the host
                keeps the backend it returns, e.g. ``host_spec.testing.FaultyStorage``
                to inject write failures. Ignored when ``data_dir`` is ``None``.
            run_data: Where the run's data lives when it is not ``data_dir`` (a worker's
                store URL): the sandbox keeps members' commands away from it.

        Raises:
            DshError: a model, profile or plugin failure; nothing stays loaded.
        """
        adapter = resolve_model(model)
        resolved = load_profile(profile) if isinstance(profile, (str, os.PathLike)) else profile
        sandbox = Sandbox.for_run(resolved.sandbox if resolved is not None else SandboxSettings(),
                                  data_dir if run_data is None else run_data)
        sandbox.check()  # SANDBOX_UNAVAILABLE before anything opens: never a silent run without one
        store: StorageBackend | None = open_backend(data_dir) if data_dir is not None else None
        opened = store
        if store is not None and wrap_storage is not None:
            store = wrap_storage(store)
        spec = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
        host = cls(store=store, model=adapter, model_spec=spec, sandbox=sandbox)
        host._opened_store = opened
        if hasattr(opened, "leases"):  # a shared store: members' model and workspace calls may run on workers
            from host_spec.host.placement.lead import PlacedModel, Placement

            host.placement = Placement(host, opened)
            host.agents.runtime.model = PlacedModel(host.models, host.placement)
            host.tools.placement = host.placement
        host.profile = resolved
        if resolved is not None:
            host.agents.runtime.compaction = resolved.compaction
            if resolved.permissions.active:
                from host_spec.host.agents.permission_gate import PermissionGate

                host.tools.permissions = PermissionGate(resolved.permissions, host.permission_router)
        try:
            for member_spec in resolved.models.values() if resolved is not None else ():
                if member_spec != spec:  # a bad member model fails here, before anything runs
                    host.models.add(member_spec, resolve_spec(member_spec))
            for name, plugin in extra_plugins:
                host.plugins.load(name, plugin=plugin)
            if host.placement is not None:  # worktree steps of members on workers run there (placement.worktrees)
                from host_spec.host.placement.worktrees import placed_worktrees_plugin

                host.plugins.load("dsh-placement-worktrees", plugin=placed_worktrees_plugin())
            for entry in resolved.plugins if resolved is not None else ():
                host.plugins.load(entry.name, entry.config)
        except BaseException:
            await host.close()
            raise
        return host

    async def close(self) -> None:
        """Unload plugins (last first, with teardown), dispose agents, flush and release sessions."""
        if self._closed:
            return
        self._closed = True
        await self.plugins.unload_all()
        if self.continuations is not None:
            await self.continuations.close()  # child-first, inboxes kept for a later cold resume
        errors: list[Exception] = []  # one failure must not leave the other sessions unflushed and locked
        for agent in reversed(list(self.agents.list())):
            try:
                await self.dispose_agent(agent)
            except Exception as exc:
                errors.append(exc)
        for session in list(self.sessions.list()):
            try:
                await self.release_session(session)
            except Exception as exc:
                errors.append(exc)
        for task in list(self._soon_tasks):
            task.cancel()
        if self._soon_tasks:
            await asyncio.gather(*self._soon_tasks, return_exceptions=True)
        await self.models.close()  # last: no agent can be mid-call any more
        if self.placement is not None:
            self.placement.close()
        close_store = getattr(self._opened_store, "close", None)
        if close_store is not None:  # a shared store's connections and lease heartbeat
            close_store()
        if errors:
            raise errors[0]

    async def __aenter__(self) -> Host:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ protocols.Host

    def service(self, api: TypeForm[S]) -> S:
        """The service a plugin published for ``api`` with ``ctx.provide``.

        Raises:
            ServiceNotFoundError: no loaded plugin provides ``api``.
        """
        return self.plugins.services.get(api)

    def find_service(self, api: TypeForm[S]) -> S | None:
        """The service a plugin published for ``api``, or ``None``."""
        return self.plugins.services.find(api)

    def permission_router(self) -> PermissionRouter | None:
        """Who answers permission asks here: the plugin that provides the router, or ``None``."""
        return self.find_service(PermissionRouter)

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the next loop iteration; an awaitable result becomes a tracked task.

        Failures are logged. Pending callbacks and their tasks keep the host from
        being quiescent.
        """
        self._soon_pending += 1
        asyncio.get_running_loop().call_soon(self._run_soon, fn)

    def _run_soon(self, fn: Callable[[], Any]) -> None:
        try:
            result = fn()
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._soon_tasks.add(task)
                task.add_done_callback(self._soon_done)
        except Exception:
            log.exception("host.call_soon_failed")
        finally:
            self._soon_pending -= 1

    def _soon_done(self, task: asyncio.Future[Any]) -> None:
        self._soon_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("host.call_soon_failed", exc_info=task.exception())

    # ------------------------------------------------------------ SessionObserver

    def pre_append(self, session: Any, event: Any) -> None:
        self.plugins.pre_append(session, event)

    def committed(self, session: Any, event: Any) -> None:
        self.plugins.notify_session("dsh_session_event", session, "event", event)

    def flushed(self, session: Any, durable_seq: int) -> None:
        self.plugins.notify_session("dsh_session_flushed", session, "durable_seq", durable_seq)

    # ------------------------------------------------------------ AgentHooks

    def created(self, agent: Any) -> None:
        self.plugins.veto("dsh_agent_created", host=self, agent=agent)

    def session_start(self, agent: Any, source: str) -> None:
        self.plugins.notify("dsh_agent_session_start", host=self, agent=agent, source=source)

    def status(self, agent: Any, status: str) -> None:
        if self.continuations is not None:
            self.continuations.poke(agent.id)  # a resident child may have settled
        self.plugins.notify("dsh_agent_status", host=self, agent=agent, status=status)

    def turn_end(self, agent: Any, turn: int, reason: dict[str, Any]) -> None:
        self.plugins.notify("dsh_agent_turn_end", host=self, agent=agent, turn=turn, reason=reason)

    def admit_step(self, agent: Any, turn: int, step: int) -> None:
        self.plugins.veto("dsh_agent_pre_step", host=self, agent=agent, turn=turn, step=step)

    def _tool_pre_call(self, agent: Any, tool: str) -> None:
        if agent is not None:
            self.plugins.veto("dsh_tool_pre_call", host=self, agent=agent, tool=tool)

    def disposed(self, agent: Any) -> None:
        self.plugins.notify("dsh_agent_disposed", host=self, agent=agent)

    def brief(self, agent: Any) -> str:
        """Every plugin's ``dsh_context_brief`` text for ``agent``, joined by a blank line."""
        answers = self.plugins.collect("dsh_context_brief", host=self, agent=agent)
        return "\n\n".join(text.strip() for text in answers if isinstance(text, str) and text.strip())

