"""Profiles: built-ins, layering, and errors that name the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from host_spec.errors import ConfigError
from host_spec.host.plugins.profiles import builtin_profiles, known_plugin_names, load_profile

KNOWN = {"subagent", "subagent-fork", "subagent-control", "dsh-team", "dsh-team-tools", "dsh-team-invariant", "workspace", "extra"}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(spec: str | Path, known: set[str] = KNOWN) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_profile(spec, known=known)
    assert info.value.code == "CONFIG_INVALID"
    return info.value


class TestBuiltins:
    def test_builtin_names(self) -> None:
        """The host ships exactly the headless and agent-teams profiles."""
        assert builtin_profiles() == ["agent-teams", "headless"]

    def test_headless_loads_legacy_delegation(self) -> None:
        """headless registers the three legacy delegation plugins, with spawn/fork providers, and the workspace tools."""
        profile = load_profile("headless")
        assert profile.names() == ("subagent", "subagent-fork", "subagent-control", "workspace")
        assert dict(profile.config("workspace") or {}) == {}
        assert dict(profile.config("subagent") or {}) == {"provider": "spawn", "tool_name": "subagent"}
        assert dict(profile.config("subagent-fork") or {}) == {"provider": "fork", "tool_name": "subagent_fork"}
        assert profile.disabled == ()

    def test_agent_teams_replaces_legacy_tools_by_team_plugins(self) -> None:
        """agent-teams disables every legacy delegation plugin (G2), keeps the workspace tools, adds the Team trio."""
        profile = load_profile("agent-teams")
        assert profile.names() == ("workspace", "dsh-team", "dsh-team-tools", "dsh-team-invariant")
        assert profile.disabled == ("subagent", "subagent-control", "subagent-fork")
        assert dict(profile.config("dsh-team") or {}) == {
            "max_members": 8,
            "max_tasks": 256,
            "max_pending_messages_per_member": 64,
            "max_message_bytes": 65536,
            "disposal_timeout_ms": 5000,
        }
        assert dict(profile.config("dsh-team-tools") or {}) == {"fresh_provider": "spawn", "fork_provider": "fork"}
        assert dict(profile.config("dsh-team-invariant") or {}) == {}
        assert [Path(s).name for s in profile.sources] == ["headless.toml", "agent-teams.toml"]
        assert profile.config("subagent") is None

    def test_default_known_names_are_the_installed_entry_points(self) -> None:
        """Without ``known`` the installed entry points decide which names are valid."""
        assert {"subagent", "dsh-team"} <= known_plugin_names()
        assert load_profile("agent-teams").names()[1] == "dsh-team"


class TestLayering:
    def test_a_later_table_replaces_config_wholesale_and_keeps_position(self, tmp_path: Path) -> None:
        """A layer's table for a loaded plugin replaces its whole config; load order is kept."""
        path = write(tmp_path, "p.toml", 'extends = "headless"\n[plugins.subagent]\nmax_depth = 2\n[plugins.extra]\nx = 1\n')
        profile = load_profile(path, known=KNOWN)
        assert profile.names() == ("subagent", "subagent-fork", "subagent-control", "workspace", "extra")
        assert dict(profile.config("subagent") or {}) == {"max_depth": 2}

    def test_extends_a_path_relative_to_the_file(self, tmp_path: Path) -> None:
        """``extends`` may name another file, resolved relative to the extending file."""
        (tmp_path / "sub").mkdir()
        write(tmp_path, "base.toml", "[plugins.extra]\n")
        child = write(tmp_path / "sub", "child.toml", 'extends = "../base.toml"\n[plugins.dsh-team]\n')
        profile = load_profile(str(child), known=KNOWN)
        assert profile.names() == ("extra", "dsh-team")
        assert len(profile.sources) == 2

    def test_a_later_layer_re_enables_a_disabled_plugin(self, tmp_path: Path) -> None:
        """A table in a later layer undoes an earlier ``disable`` (later wins)."""
        path = write(tmp_path, "p.toml", 'extends = "agent-teams"\n[plugins.subagent]\n')
        profile = load_profile(path, known=KNOWN)
        assert profile.names()[-1] == "subagent"
        assert "subagent" not in profile.disabled

    def test_disabling_an_absent_plugin_is_harmless(self, tmp_path: Path) -> None:
        """Disabling a known plugin that no layer loads changes nothing but the record."""
        path = write(tmp_path, "p.toml", 'disable = ["extra"]\n[plugins.dsh-team]\n')
        profile = load_profile(path, known=KNOWN)
        assert profile.names() == ("dsh-team",)
        assert profile.disabled == ("extra",)

    def test_description_comes_from_the_outermost_file(self, tmp_path: Path) -> None:
        """The profile's description is the extending file's own."""
        path = write(tmp_path, "p.toml", 'extends = "headless"\ndescription = "mine"\n')
        assert load_profile(path, known=KNOWN).description == "mine"


class TestErrors:
    def test_unknown_profile_name(self) -> None:
        """An unknown built-in name lists the built-ins."""
        error = error_of("nope")
        assert 'unknown profile "nope"' in str(error) and "agent-teams, headless" in str(error)
        assert error.path == "profile"

    def test_missing_file(self, tmp_path: Path) -> None:
        """A path that cannot be read is reported with the path."""
        error = error_of(tmp_path / "missing.toml")
        assert "cannot read" in str(error) and "missing.toml" in str(error)

    def test_invalid_toml(self, tmp_path: Path) -> None:
        """Broken TOML is a config error, not a crash."""
        error = error_of(write(tmp_path, "p.toml", "[plugins\n"))
        assert "invalid TOML" in str(error)

    def test_unknown_top_level_key(self, tmp_path: Path) -> None:
        """A misspelt top-level key is named."""
        error = error_of(write(tmp_path, "p.toml", 'extend = "headless"\n'))
        assert "extra fields found (extend) @ <top level>" in str(error)

    def test_wrong_type_names_the_field(self, tmp_path: Path) -> None:
        """A value of the wrong type names its field path."""
        error = error_of(write(tmp_path, "p.toml", 'disable = "subagent"\n'))
        assert "@ disable" in str(error)
        error = error_of(write(tmp_path, "q.toml", "disable = [1]\n"))
        assert "expected a string, got int @ disable[0]" in str(error)
        assert error.path == "disable[0]"

    def test_plugin_entry_must_be_a_table(self, tmp_path: Path) -> None:
        """``plugins.<name>`` must be a table."""
        error = error_of(write(tmp_path, "p.toml", "[plugins]\nsubagent = 3\n"))
        assert "expected a mapping @ plugins.subagent" in str(error)

    def test_unknown_plugin_in_a_table(self, tmp_path: Path) -> None:
        """A plugin table for a name no entry point declares is rejected, naming it."""
        error = error_of(write(tmp_path, "p.toml", "[plugins.dsh-teams]\n"))
        assert 'unknown plugin "dsh-teams" @ plugins.dsh-teams' in str(error)
        assert error.path == "plugins.dsh-teams"

    def test_unknown_plugin_in_disable(self, tmp_path: Path) -> None:
        """A disabled name must be a known plugin too."""
        error = error_of(write(tmp_path, "p.toml", 'disable = ["subagent", "nope"]\n'))
        assert error.path == "disable[1]" and '"nope"' in str(error)

    def test_configured_and_disabled_in_one_file(self, tmp_path: Path) -> None:
        """One file may not both configure and disable a plugin."""
        error = error_of(write(tmp_path, "p.toml", 'disable = ["extra"]\n[plugins.extra]\n'))
        assert "both configured and disabled" in str(error) and error.path == "plugins.extra"

    def test_extends_cycle(self, tmp_path: Path) -> None:
        """A profile extending itself, directly or not, is rejected."""
        write(tmp_path, "a.toml", 'extends = "b.toml"\n')
        write(tmp_path, "b.toml", 'extends = "a.toml"\n')
        error = error_of(tmp_path / "a.toml")
        assert "extends itself" in str(error) and error.path == "extends"

    def test_error_in_an_extended_file_names_that_file(self, tmp_path: Path) -> None:
        """An error deep in the chain names the file it is in."""
        write(tmp_path, "base.toml", "bogus = 1\n")
        error = error_of(write(tmp_path, "p.toml", 'extends = "base.toml"\n'))
        assert "base.toml" in str(error) and "bogus" in str(error)
