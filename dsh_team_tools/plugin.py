"""Plugin ``dsh-team-tools``: the nine Team tools and ``team:policy``, installed per member.

A member spawned with a role that has a tool allowlist also gets the host's
restriction of its scope to those tools plus the Team's own (``tools.restrict``).

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

One :class:`Installer` per host holds that host's installs; the plugin registers
it with the host's hooks (``dsh_agent_created``, ``dsh_agent_disposed``). The
tools do not hold the Team service object: they look it up by type
(``host.find_service(TeamServiceAPI)``) on every call, so reloading ``dsh-team``
never leaves them talking to a disposed service.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from dsh_team import TeamCode, TeamError, TeamServiceAPI
from host_spec import hookimpl
from host_spec.errors import PluginError
from host_spec.records import Handle, PromptSection

from dsh_team_tools.config import ToolsConfig, load_config
from dsh_team_tools.policy import POLICY_TEXT, SECTION_NAME, TEAM_POLICY
from dsh_team_tools.tools import build_tools

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host, PluginContext
    from host_spec.records import ToolSpec

__all__ = ["Installer", "effective_config"]

log = structlog.get_logger(__name__)


@attrs.define(eq=False)
class Installer:
    """One host's installs: ``agent id -> (agent, handle of its whole set)``."""

    host: Host
    config: ToolsConfig
    specs: list[ToolSpec] = attrs.field(init=False)
    installs: dict[str, tuple[Agent, Handle]] = attrs.Factory(dict)

    def __attrs_post_init__(self) -> None:
        self.specs = build_tools(self.team, self.config, available=self.enabled)

    def team(self) -> TeamServiceAPI:
        """The Team service now (looked up on every call, so a ``dsh-team`` reload is seen).

        Raises:
            TeamError: ``TEAM_DISPOSED`` while ``dsh-team`` is not loaded.
        """
        service = self.host.find_service(TeamServiceAPI)
        if service is None:
            raise TeamError("Agent Teams service is not loaded", code=TeamCode.DISPOSED)
        return service

    def enabled(self, agent: Agent) -> bool:
        """Team mode of the agent's tree, read at step preparation.

        Without a loaded service the tools could only fail, so they are hidden.
        """
        service = self.host.find_service(TeamServiceAPI)
        return service is not None and service.is_enabled(agent)

    def policy(self, agent: Agent) -> str:
        """The policy text while Team mode is on, else nothing (an empty section is dropped)."""
        return POLICY_TEXT if self.enabled(agent) else ""

    def is_member(self, agent: Agent) -> bool:
        """Whether ``agent`` belongs to a Team now (never raises: a non-member gets nothing)."""
        service = self.host.find_service(TeamServiceAPI)
        return service is not None and service.try_membership(agent) is not None

    @hookimpl(specname="dsh_agent_created")
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
            allowed = self.team().tool_allowlist(agent)
            if allowed is not None:  # a role's allowlist; the Team's own tools always stay
                handles.append(self.host.tools.restrict(scope, allowed | {spec.name for spec in self.specs}))
        except BaseException:
            _dispose_all(handles)
            raise
        self.installs[agent.id] = (agent, Handle(lambda: _dispose_all(handles), label=f"team-tools:{agent.id}"))
        log.debug("team_tools.installed", agent=agent.id)

    @hookimpl(specname="dsh_agent_disposed")
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


def effective_config(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The config table validated, with every default filled in (``dsh plugins``)."""
    return attrs.asdict(load_config(raw))


@hookimpl
def dsh_plugin_loaded(host: Host, ctx: PluginContext) -> None:
    config = load_config(ctx.config, f"plugins.{ctx.name}")
    if host.find_service(TeamServiceAPI) is None:
        raise PluginError(f'plugin "{ctx.name}" needs the Team service (TeamServiceAPI): load dsh-team first')
    installer = Installer(host, config)
    ctx.register(installer)
    ctx.own(Handle(installer.uninstall_all, label="team-tools:installs"))
    for agent in host.agents.list():
        installer.install(agent)
