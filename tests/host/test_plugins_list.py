"""``dsh plugins``: the resolved profile, origins, config after defaults, what is disabled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from host_spec.errors import DshError
from host_spec.host.cli.main import main
from host_spec.host.cli.plugins_list import describe, render


class TestDescribe:
    def test_agent_teams_lists_plugins_in_load_order_with_defaults(self) -> None:
        doc = describe("agent-teams")
        assert [plugin["name"] for plugin in doc["plugins"]] == [
            "workspace", "dsh-team", "dsh-team-tools", "dsh-team-invariant"]
        team = doc["plugins"][1]
        assert team["entry_point"] == "dsh_team.plugin" and team["distribution"] == "dsh-team"
        assert team["config"]["max_members"] == 8, "the profile's value"
        assert team["config"]["team_mode_default"] is True, "a default the profile does not state"
        assert team["defaults_applied"] and doc["plugins"][3]["config"] == {}
        assert doc["plugins"][0]["config"]["bash_timeout_ms"] == 120000
        assert doc["disabled"] == ["subagent", "subagent-control", "subagent-fork"]
        assert doc["sources"][-1].endswith("agent-teams.toml")

    def test_a_plugin_without_effective_config_shows_its_table_as_written(self) -> None:
        doc = describe("headless")
        legacy = {plugin["name"]: plugin for plugin in doc["plugins"]}["subagent"]
        assert legacy["defaults_applied"] is False and legacy["config"] == {"provider": "spawn", "tool_name": "subagent"}
        assert "(as written; the plugin declares no defaults)" in render(doc)

    def test_the_web_token_is_never_shown(self, tmp_path: Path) -> None:
        profile = tmp_path / "p.toml"
        profile.write_text('extends = "agent-teams"\n[plugins.dsh-team-web]\ntoken = "s3cret"\n'
                           '[models]\n"review*" = "scripted:x.json"\n')
        doc = describe(str(profile))
        web = doc["plugins"][-1]
        assert web["name"] == "dsh-team-web" and web["config"] == {"host": "127.0.0.1", "port": 0, "token": "***"}
        assert "s3cret" not in json.dumps(doc) and "s3cret" not in render(doc)
        assert "Models: review* -> scripted:x.json" in render(doc)
        profile.write_text('extends = "agent-teams"\n[plugins.dsh-team-web]\n')
        assert describe(str(profile))["plugins"][-1]["config"]["token"] is None

    def test_an_invalid_config_value_names_the_field(self, tmp_path: Path) -> None:
        profile = tmp_path / "p.toml"
        profile.write_text('extends = "agent-teams"\n[plugins.dsh-team]\nmax_members = 0\n')
        with pytest.raises(DshError, match="max_members"):
            describe(str(profile))
        profile.write_text('extends = "agent-teams"\n[plugins.dsh-team-invariant]\nstrict = true\n')
        with pytest.raises(DshError, match="strict"):
            describe(str(profile))


@pytest.fixture
def cli() -> Iterator[None]:
    """``main`` configures structlog for the process; later tests capture logs, so reset it."""
    yield
    structlog.reset_defaults()


@pytest.mark.usefixtures("cli")
class TestCommand:
    def test_text_and_json(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["plugins", "--profile", "agent-teams"]) == 0
        text = capsys.readouterr().out
        assert "2. dsh-team  dsh_team.plugin  (dsh-team " in text and "team_mode_default = true" in text
        assert main(["plugins", "--profile", "agent-teams", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["version"] == 1

    def test_an_unknown_profile_is_one_error_line(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["plugins", "--profile", "no-such-profile"]) == 2
        assert capsys.readouterr().err.startswith("dsh: CONFIG_INVALID: ")




def test_the_listing_shows_the_sandbox(tmp_path: Path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text('extends = "agent-teams"\n[sandbox.members."rev*"]\npolicy = "read-only"\n')
    doc = describe(str(profile))
    assert doc["sandbox"]["policy"] == "workspace-write" and doc["sandbox"]["members"]["rev*"]["policy"] == "read-only"
    assert 'Sandbox: workspace-write, network off; rev*: {"policy": "read-only", "network": null}' in render(doc)
