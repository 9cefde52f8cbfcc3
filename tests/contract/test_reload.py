"""Hot reload of one plugin: new code live, nothing duplicated, broken edits roll back.

The plugin under test is a real package written to ``tmp_path`` with a real
``.dist-info`` entry point, so discovery, import, reload and rollback all run the
production path. It installs one global tool and one tool into every live agent's
scope (through its ledger) from a per-host hook object, and provides a service by
type, like the Team plugins do.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from host_spec.errors import PluginError
from host_spec.events import json_decode
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.plugins.profiles import PluginEntry, Profile
from host_spec.host.plugins.reload import package_prefix, reload_plugin
from host_spec.messages import user_message
from host_spec.records import AbortSignal

PLUGIN = '''
from host_spec import hookimpl
from .tools import VERSION, VersionAPI, global_spec, scoped_spec

LOADS = []

class Installer:
    """Per-host state: puts the scoped tool into every agent of its host."""

    def __init__(self, host, ctx):
        self.host, self.ctx = host, ctx

    @hookimpl(specname="dsh_agent_created")
    def install(self, agent):
        self.ctx.own(self.host.tools.register(scoped_spec(), scope=agent.scope))

class Version:
    version = VERSION

@hookimpl
def dsh_plugin_loaded(host, ctx):
    LOADS.append(ctx.name)
    ctx.own(host.tools.register(global_spec()))
    installer = Installer(host, ctx)
    ctx.register(installer)
    for agent in host.agents.list():
        installer.install(agent)
    ctx.provide(VersionAPI, Version())

import types as _types
PLUGIN_OBJ = _types.SimpleNamespace(dsh_plugin_loaded=dsh_plugin_loaded)
'''

TOOLS = '''
from typing import Protocol, runtime_checkable

import msgspec
from host_spec.records import ToolSpec

VERSION = "{version}"

@runtime_checkable
class VersionAPI(Protocol):
    version: str

class Args(msgspec.Struct, forbid_unknown_fields=True):
    """Report the plugin version."""

class Result(msgspec.Struct):
    version: str

async def _execute(args, call):
    return Result(version=VERSION)

def global_spec():
    return ToolSpec("plugin_version", "Report the plugin version.", Args, Result, _execute)

def scoped_spec():
    return ToolSpec("scoped_version", "Report the plugin version.", Args, Result, _execute)
'''


def write_package(root: Path, version: str, *, plugin: str = PLUGIN) -> None:
    package = root / "reloadplug"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(textwrap.dedent(plugin))
    (package / "tools.py").write_text(TOOLS.format(version=version))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site dir on sys.path holding package ``reloadplug`` and its ``dsh`` entry point."""
    root = tmp_path / "site"
    write_package(root, "v1")
    dist = root / "reloadplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: reloadplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[dsh]\nreload-plug = reloadplug.plugin\n")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # edits within one second must be seen
    yield root
    for name in [name for name in sys.modules if name == "reloadplug" or name.startswith("reloadplug.")]:
        del sys.modules[name]


PROFILE = Profile(name="test", plugins=(PluginEntry("reload-plug", {}),))


async def open_host(tmp_path: Path) -> Host:
    model = ScriptedModel.from_mapping({"lead": [{"text": "hi"}]})
    return await Host.open(tmp_path / "data", PROFILE, model)


async def call(host: Host, agent: Any, name: str) -> Any:
    result = await host.tools.execute(agent, "c1", name, b"{}", AbortSignal())
    return result.error["code"] if result.is_error else json_decode(result.content[0]["text"])["version"]


def tool_names(host: Host, agent: Any) -> list[str]:
    return [spec.name for spec in host.tools.visible(agent)]


class TestReload:
    async def test_new_code_is_live_without_duplicates(self, site: Path, tmp_path: Path) -> None:
        """After an edit and a reload both tools answer with the new code, registered once each."""
        host = await open_host(tmp_path)
        try:
            agent = await host.run("hello")
            assert await call(host, agent, "scoped_version") == "v1"
            old = host.plugins.get("reload-plug")
            old_api = sys.modules["reloadplug.tools"].VersionAPI
            (old_installer,) = host.plugins.hook_objects("reload-plug")
            write_package(site, "v2")
            new = await host.plugins.reload("reload-plug")
            assert new is host.plugins.get("reload-plug") and new.plugin is not old.plugin
            assert old.ctx.closed and not new.ctx.closed
            assert await call(host, agent, "plugin_version") == "v2"
            assert await call(host, agent, "scoped_version") == "v2"
            assert tool_names(host, agent) == ["plugin_version", "scoped_version"]
            new_api = sys.modules["reloadplug.tools"].VersionAPI
            assert new_api is not old_api  # a fresh class; a caller holding the old one still finds v2
            assert host.service(old_api).version == "v2" and host.service(new_api) is host.service(old_api)
            (new_installer,) = host.plugins.hook_objects("reload-plug")
            assert new_installer is not old_installer and type(new_installer) is not type(old_installer)
            assert host.plugins.names() == ["reload-plug"]
            # the live agent kept running and still works
            assert host.agents.get(agent.id) is agent and not agent.disposed
            agent.followup(user_message("again"))
            await host.quiesce()
            assert agent.status == "idle"
            newcomer = host.start_agent(await host.create_session(), name="newcomer")
            assert await call(host, newcomer, "scoped_version") == "v2"  # the new object installed it
            # reload is repeatable: one more version, still one registration each
            write_package(site, "v3")
            await reload_plugin(host.plugins, "reload-plug")
            assert tool_names(host, agent) == ["plugin_version", "scoped_version"]
            assert await call(host, agent, "scoped_version") == "v3"
        finally:
            await host.close()

    async def test_broken_edit_keeps_the_old_version_then_a_fix_loads(self, site: Path, tmp_path: Path) -> None:
        """A syntax error is rejected before teardown (nothing freed); the fixed edit then loads."""
        host = await open_host(tmp_path)
        try:
            agent = await host.run("hello")
            old = host.plugins.get("reload-plug")
            old_modules = {name: sys.modules[name] for name in ("reloadplug", "reloadplug.plugin", "reloadplug.tools")}
            (site / "reloadplug" / "tools.py").write_text("VERSION = = 'broken'\n")
            with pytest.raises(PluginError, match="the loaded version is kept") as info:
                await host.plugins.reload("reload-plug")
            assert "SyntaxError" in repr(info.value.__cause__)
            assert host.plugins.get("reload-plug") is old and not old.ctx.closed
            assert all(sys.modules[name] is module for name, module in old_modules.items())
            assert await call(host, agent, "scoped_version") == "v1"
            write_package(site, "v4")
            await host.plugins.reload("reload-plug")
            assert await call(host, agent, "scoped_version") == "v4"
            assert tool_names(host, agent) == ["plugin_version", "scoped_version"]
        finally:
            await host.close()

    async def test_invalid_hooks_are_rejected_on_a_scratch_manager(self, site: Path, tmp_path: Path) -> None:
        """A new version with an unknown hook fails validation; the live plugin is untouched."""
        bad = PLUGIN + "\n@hookimpl\ndef dsh_no_such_hook(host):\n    pass\n"
        host = await open_host(tmp_path)
        try:
            old = host.plugins.get("reload-plug")
            write_package(site, "v2", plugin=bad)
            with pytest.raises(PluginError, match="dsh_no_such_hook"):
                await host.plugins.reload("reload-plug")
            assert host.plugins.get("reload-plug") is old and not old.ctx.closed
            assert sys.modules["reloadplug.plugin"] is old.plugin
            assert await call(host, None, "plugin_version") == "v1"
        finally:
            await host.close()

    async def test_an_invalid_hook_object_restores_the_previous_version(self, site: Path, tmp_path: Path) -> None:
        """A new version whose per-host object has an unknown hook fails its load; the old one comes back whole."""
        broken = PLUGIN.replace('specname="dsh_agent_created"', 'specname="dsh_no_such_hook"')
        host = await open_host(tmp_path)
        try:
            agent = await host.run("hello")
            old = host.plugins.get("reload-plug")
            write_package(site, "v2", plugin=broken)
            with pytest.raises(PluginError, match="previous version was restored: .*dsh_no_such_hook"):
                await host.plugins.reload("reload-plug")
            restored = host.plugins.get("reload-plug")
            assert restored is not None and restored.plugin is old.plugin
            (installer,) = host.plugins.hook_objects("reload-plug")
            assert type(installer) is old.plugin.Installer
            assert host.service(sys.modules["reloadplug.tools"].VersionAPI).version == "v1"
            assert tool_names(host, agent) == ["plugin_version", "scoped_version"]
            newcomer = host.start_agent(await host.create_session(), name="newcomer")
            assert await call(host, newcomer, "scoped_version") == "v1"  # the restored object is hooked
        finally:
            await host.close()

    async def test_failing_load_restores_the_previous_version(self, site: Path, tmp_path: Path) -> None:
        """A new version whose ``dsh_plugin_loaded`` fails is unloaded and the old one re-loaded."""
        failing = PLUGIN.replace("    LOADS.append(ctx.name)\n", "    LOADS.append(ctx.name)\n    raise RuntimeError('new version broke')\n")
        host = await open_host(tmp_path)
        try:
            agent = await host.run("hello")
            old = host.plugins.get("reload-plug")
            write_package(site, "v2", plugin=failing)
            with pytest.raises(PluginError, match="previous version was restored: .*new version broke"):
                await host.plugins.reload("reload-plug")
            restored = host.plugins.get("reload-plug")
            assert restored is not None and restored.plugin is old.plugin and restored.ctx is not old.ctx
            assert sys.modules["reloadplug.plugin"] is old.plugin
            assert old.plugin.LOADS == ["reload-plug", "reload-plug"]
            assert await call(host, agent, "scoped_version") == "v1"
            assert tool_names(host, agent) == ["plugin_version", "scoped_version"]
        finally:
            await host.close()

    async def test_previous_version_that_cannot_come_back(self, site: Path, tmp_path: Path) -> None:
        """If the restored version fails to load too, the error says so and the plugin is gone."""
        fragile = PLUGIN.replace(
            "    LOADS.append(ctx.name)\n",
            "    LOADS.append(ctx.name)\n    if len(LOADS) > 1:\n        raise RuntimeError('loads once')\n",
        )
        failing = PLUGIN.replace("    LOADS.append(ctx.name)\n", "    raise RuntimeError('new version broke')\n")
        write_package(site, "v1", plugin=fragile)
        host = await open_host(tmp_path)
        try:
            write_package(site, "v2", plugin=failing)
            with pytest.raises(PluginError, match="did not load again: .*loads once"):
                await host.plugins.reload("reload-plug")
            assert host.plugins.get("reload-plug") is None
            assert host.tools.visible(None) == []
        finally:
            await host.close()

    async def test_entry_points_naming_an_attribute(self, site: Path, tmp_path: Path) -> None:
        """A plugin given as ``module:attr`` reloads as the new module's attribute."""
        host = await Host.open(None, None, ScriptedModel.from_mapping({}))
        try:
            import reloadplug.plugin as first

            host.plugins.load("reload-obj", plugin=first.PLUGIN_OBJ, module="reloadplug.plugin", attr="PLUGIN_OBJ")
            write_package(site, "v2")
            loaded = await host.plugins.reload("reload-obj")
            assert loaded.plugin is sys.modules["reloadplug.plugin"].PLUGIN_OBJ
            assert loaded.plugin is not first.PLUGIN_OBJ
            assert await call(host, None, "plugin_version") == "v2"
        finally:
            await host.close()

    async def test_only_loaded_module_plugins_reload(self, tmp_path: Path) -> None:
        """Reloading an unknown name, or a plugin registered as an object, is refused."""
        host = await Host.open(None, None, ScriptedModel.from_mapping({}))
        try:
            with pytest.raises(PluginError, match="not loaded"):
                await host.plugins.reload("nope")
            host.plugins.load("obj", plugin=object())
            with pytest.raises(PluginError, match="cannot be reloaded"):
                await host.plugins.reload("obj")
        finally:
            await host.close()


class TestPackagePrefix:
    def test_a_distribution_package_reloads_whole(self) -> None:
        """A plugin package reloads as a whole module graph."""
        assert package_prefix("dsh_team.plugin") == "dsh_team"
        assert package_prefix("single") == "single"

    def test_host_shipped_plugins_reload_alone(self) -> None:
        """Base plugins inside ``host_spec`` never re-import the host or the contract."""
        assert package_prefix("host_spec.host.base.subagent") == "host_spec.host.base.subagent"

    async def test_base_plugin_reload_keeps_the_host_modules(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Reloading a base plugin replaces only its module; the host's modules stay."""
        import host_spec.host.base
        import host_spec.host.base.control as control
        import host_spec.host.plugins.manager as plugins_module

        # put the original module back afterwards: other tests hold its classes
        monkeypatch.setitem(sys.modules, "host_spec.host.base.control", control)
        monkeypatch.setattr(host_spec.host.base, "control", control)
        host = await Host.open(None, "headless", ScriptedModel.from_mapping({}))
        try:
            before = host.plugins.get("subagent-control").plugin
            await host.plugins.reload("subagent-control")
            after = host.plugins.get("subagent-control").plugin
            assert after is not before and after is sys.modules["host_spec.host.base.control"]
            assert sys.modules["host_spec.host.plugins.manager"] is plugins_module
            assert host.plugins.names() == ["subagent", "subagent-fork", "subagent-control", "workspace"]
        finally:
            await host.close()
