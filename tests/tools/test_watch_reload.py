"""Watch mode in process: which plugins a change selects, in what order, and what a reload says."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from team_tools_host import TEAM_PLUGINS, open_host, restored_modules, start_root

import dsh_team
import dsh_team_tools
from host_spec.host.cli.watching import tool_changes, visible_tools
from host_spec.host.plugins.watch import PluginWatcher, WatchedPlugin, affected, watched_plugins, where_broken

TEAM_ROOT = Path(dsh_team.__file__).parent.resolve()
TOOLS_ROOT = Path(dsh_team_tools.__file__).parent.resolve()
WEB = ("dsh-team-web", {"port": 0})
PLUG = """from host_spec import hookimpl

VALUE = 1


@hookimpl
def dsh_plugin_loaded(host, ctx):
    pass
"""


def _plugin(name: str, namespace: str, path: Path, *imports: str) -> WatchedPlugin:
    return WatchedPlugin(name, namespace + ".plugin", namespace, path, frozenset(imports))


class TestSelection:
    """``affected`` against a hand-built model of three plugins, one nested in another's package."""

    team = _plugin("team", "pkg", Path("/src/pkg"), "pkg.core", "host_spec")
    web = _plugin("web", "pkg.web", Path("/src/pkg/web"), "pkg.core", "pkg.web.page")
    tools = _plugin("tools", "tools", Path("/src/tools"), "pkg", "host_spec.records")
    plugins = (team, web, tools)

    def test_a_core_file_reloads_its_plugin_and_every_importer_in_load_order(self) -> None:
        assert affected(self.plugins, [Path("/src/pkg/core/fold.py")]) == ["team", "web", "tools"]

    def test_a_nested_plugin_owns_its_own_files(self) -> None:
        assert affected(self.plugins, [Path("/src/pkg/web/page.py")]) == ["web"]

    def test_a_leaf_plugin_reloads_alone(self) -> None:
        assert affected(self.plugins, [Path("/src/tools/tools.py")]) == ["tools"]

    def test_non_python_files_and_unwatched_paths_select_nothing(self) -> None:
        assert affected(self.plugins, [Path("/src/pkg/web/static/app.js"), Path("/elsewhere/x.py")]) == []

    def test_an_extra_path_no_plugin_owns_reloads_everything(self) -> None:
        assert affected(self.plugins, [Path("/shared/util.txt")], extra=[Path("/shared")]) == ["team", "web", "tools"]


class TestWatchedPlugins:
    async def test_namespaces_follow_the_loaded_plugins(self, tmp_path: Path) -> None:
        async with open_host(tmp_path / "data", plugins=(*TEAM_PLUGINS, WEB)) as host:
            watched = {plugin.name: plugin for plugin in watched_plugins(host.plugins)}
        assert watched["dsh-team"].namespace == "dsh_team" and watched["dsh-team"].path == TEAM_ROOT
        assert watched["dsh-team-web"].namespace == "dsh_team.web"
        assert watched["dsh-team-tools"].path == TOOLS_ROOT
        assert any(module.startswith("dsh_team.") for module in watched["dsh-team-tools"].imports)
        change = [TEAM_ROOT / "core" / "fold.py"]
        assert affected(list(watched.values()), change) == ["dsh-team", "dsh-team-tools", "dsh-team-invariant",
                                                            "dsh-team-web"]
        assert affected(list(watched.values()), [TEAM_ROOT / "web" / "app.py"]) == ["dsh-team-web"]


class TestApply:
    async def test_a_reload_reinstalls_member_tools_and_appends_nothing(self, tmp_path: Path) -> None:
        lines: list[str] = []
        with restored_modules("dsh_team_tools"):
            async with open_host(tmp_path / "data", plugins=TEAM_PLUGINS) as host:
                lead = await start_root(host)
                before = len(lead.session.events)
                watcher = PluginWatcher(host.plugins, lines.append, tool_counts=lambda: visible_tools(host),
                                        compare=tool_changes)
                done = await watcher.apply([TOOLS_ROOT / "tools.py"])
                assert done == ["dsh-team-tools"] and watcher.reloads == 1
                assert len(lead.session.events) == before, "a reload appends nothing"
                assert sys.modules["dsh_team_tools"] is not dsh_team_tools
        assert len(lines) == 1 and lines[0].startswith("[dsh] reloaded dsh-team-tools (")
        assert "tools.py" in lines[0] and lines[0].endswith("tools reinstalled for 1 member")

    async def test_a_broken_save_keeps_the_loaded_version_and_says_where(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        site = tmp_path / "site"
        (site / "watchplug").mkdir(parents=True)
        (site / "watchplug" / "__init__.py").write_text("")
        source = site / "watchplug" / "plugin.py"
        source.write_text(PLUG)
        dist = site / "watchplug-0.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: watchplug\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text("[dsh]\nwatch-plug = watchplug.plugin\n")
        monkeypatch.syspath_prepend(str(site))
        monkeypatch.setattr(sys, "dont_write_bytecode", True)
        lines: list[str] = []
        with restored_modules("watchplug"):
            async with open_host(tmp_path / "data", plugins=[("watch-plug", {})]) as host:
                original = host.plugins.get("watch-plug").plugin  # type: ignore[union-attr]
                watcher = PluginWatcher(host.plugins, lines.append)
                source.write_text(PLUG + "\ndef broken(:\n")
                assert await watcher.apply([source]) == []
                assert host.plugins.get("watch-plug").plugin is original  # type: ignore[union-attr]
                source.write_text(PLUG + "\nVALUE = 2\n")
                assert await watcher.apply([source]) == ["watch-plug"]
                assert host.plugins.get("watch-plug").plugin.VALUE == 2  # type: ignore[union-attr]
        assert lines[0].startswith('[dsh] reload of plugin "watch-plug" failed, the loaded version is kept: ')
        assert lines[0].endswith(f"({source.resolve()}, line 10)"), lines[0]
        assert lines[1].startswith("[dsh] reloaded watch-plug (") and lines[1].endswith("tools reinstalled for 0 members")


class TestWhere:
    def test_a_syntax_error_names_its_file_and_line(self) -> None:
        try:
            compile("x = (", "/src/pkg/mod.py", "exec")
        except SyntaxError as exc:
            error = RuntimeError("reload failed")
            error.__cause__ = exc
        assert where_broken(error, Path("/src/pkg")) == "/src/pkg/mod.py, line 1"

    def test_another_error_names_the_deepest_frame_inside_the_plugin(self) -> None:
        here = Path(__file__).resolve()
        try:
            raise ValueError("boom")
        except ValueError as exc:
            caught: Any = exc
        assert where_broken(caught, here.parent).startswith(f"{here}, line ")
        assert where_broken(caught, Path("/nowhere")) == "/nowhere"
