"""Plugin ``dsh-team-tools``: the nine Team tools and ``team:policy``, installed per member.

Nothing is registered globally: a non-member (and a call without an agent) never
sees a Team tool, and inside a member the scoped tools shadow same-named legacy
globals. Each member agent gets one *install* (policy section, then the nine
tools, registered into ``agent.scope``) when it is created, or at plugin load for
agents that are already live (``dsh_agent_created`` is not replayed for them).
An install is all-or-nothing: a registration failure (a same-scope name
collision) disposes what that install registered so far, in reverse, and
propagates. Installs are removed when their agent is disposed, and all at once
by a single handle in the plugin's ledger on unload/reload, so a reload leaves no
duplicate and running agents keep running.

The tools do not hold the Team service object: they look it up on every call
through ``host.service``, so reloading ``dsh-team`` never leaves them talking to
a disposed service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import structlog

from dsh_team.errors import TeamCode, TeamError
from dsh_team.service import SERVICE_KEY
from host_spec import hookimpl
from host_spec.errors import PluginError
from host_spec.records import Handle, PromptSection

from dsh_team_tools.config import ToolsConfig, load_config
from dsh_team_tools.policy import POLICY_TEXT, SECTION_NAME, TEAM_POLICY
from dsh_team_tools.tools import build_tools

if TYPE_CHECKING:
    from host_spec.protocols import Agent
    from host_spec.records import ToolSpec

__all__ = ["SERVICE_KEY", "Installer", "installer_for"]

log = structlog.get_logger(__name__)



@attrs.define(eq=False)
class LiveService:
    """Resolves the Team service on every use, so the tools survive a ``dsh-team`` reload."""

    host: Any

    def current(self) -> Any:
        """The Team service now.

        Raises:
            TeamError: ``TEAM_DISPOSED`` while ``dsh-team`` is not loaded.
        """
        service = self.host.service(SERVICE_KEY)
        if service is None:
            raise TeamError("Agent Teams service is not loaded", code=TeamCode.DISPOSED)
        return service

    def loaded(self) -> Any | None:
        """The Team service, or ``None`` while ``dsh-team`` is not loaded."""
        return self.host.service(SERVICE_KEY)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.current(), name)


@attrs.define(eq=False)
class Installer:
    """One host's installs: ``agent id -> (agent, handle of its whole set)``."""

    host: Any
    config: ToolsConfig
    service: LiveService
    specs: list[ToolSpec] = attrs.Factory(list)
    installs: dict[str, tuple[Any, Handle]] = attrs.Factory(dict)

    def __attrs_post_init__(self) -> None:
        self.specs = build_tools(self.service, self.config, available=self.enabled)

    def enabled(self, agent: Agent) -> bool:
        """Team mode of the agent's tree, read at step preparation.

        Without a loaded service the tools could only fail, so they are hidden.
        """
        service = self.service.loaded()
        return service is not None and bool(service.is_enabled(agent))

    def policy(self, agent: Agent) -> str:
        """The policy text while Team mode is on, else nothing (an empty section is dropped)."""
        return POLICY_TEXT if self.enabled(agent) else ""

    def is_member(self, agent: Agent) -> bool:
        """Whether ``agent`` belongs to a Team now (never raises: a non-member gets nothing)."""
        service = self.service.loaded()
        return service is not None and service.try_membership(agent) is not None

    def install(self, agent: Agent) -> None:
        """Register the policy section and the nine tools into ``agent.scope`` (all or nothing).

        A member already installed (the same live object) is left alone, so a replayed
        creation can never collide with our own registrations.

        Raises:
            RegistrationError: a same-named tool or section already exists in that scope;
                everything this install registered has been disposed again.
        """
        installed = self.installs.get(agent.id)
        if installed is not None and installed[0] is agent:
            return
        if not self.is_member(agent):
            return
        scope = agent.scope
        handles: list[Handle] = []
        try:
            section = PromptSection(name=SECTION_NAME, order=TEAM_POLICY, text=self.policy)
            handles.append(self.host.prompts.register(section, scope=scope))
            for spec in self.specs:
                handles.append(self.host.tools.register(spec, scope=scope))
        except BaseException:
            _dispose_all(handles)
            raise
        self.installs[agent.id] = (agent, Handle(lambda: _dispose_all(handles), label=f"team-tools:{agent.id}"))
        log.debug("team_tools.installed", agent=agent.id)

    def uninstall(self, agent: Agent) -> None:
        """Remove ``agent``'s install (a stale object for the same id is ignored)."""
        installed = self.installs.get(agent.id)
        if installed is not None and installed[0] is agent:
            del self.installs[agent.id]
            installed[1].dispose()

    def uninstall_all(self) -> None:
        """Remove every install, newest first (plugin unload or reload)."""
        while self.installs:
            _, (_, handle) = self.installs.popitem()
            handle.dispose()


def _dispose_all(handles: list[Handle]) -> None:
    """Dispose ``handles`` newest first."""
    for handle in reversed(handles):
        handle.dispose()


_installers: dict[int, Installer] = {}


def installer_for(host: Any) -> Installer | None:
    """The installer serving ``host`` while the plugin is loaded there."""
    installer = _installers.get(id(host))
    return installer if installer is not None and installer.host is host else None


@hookimpl
def dsh_plugin_loaded(host: Any, ctx: Any) -> None:
    config = load_config(ctx.config, f"plugins.{ctx.name}")
    if host.service(SERVICE_KEY) is None:
        raise PluginError(f'plugin "{ctx.name}" needs the "{SERVICE_KEY}" service: load dsh-team first')
    installer = Installer(host, config, LiveService(host))
    _installers[id(host)] = installer

    def unregister() -> None:
        installer.uninstall_all()
        _installers.pop(id(host), None)

    ctx.own(Handle(unregister, label="team-tools:installs"))
    for agent in host.agents.list():
        installer.install(agent)


@hookimpl
def dsh_agent_created(host: Any, agent: Agent) -> None:
    installer = installer_for(host)
    if installer is not None:
        installer.install(agent)


@hookimpl
def dsh_agent_disposed(host: Any, agent: Agent) -> None:
    installer = installer_for(host)
    if installer is not None:
        installer.uninstall(agent)
