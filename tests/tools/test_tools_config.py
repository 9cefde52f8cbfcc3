"""dsh-team-tools configuration: provider names with defaults and field-path errors."""

from __future__ import annotations

import pytest

from dsh_team_tools.config import ToolsConfig, load_config
from host_spec.errors import ConfigError


class TestToolsConfig:
    @pytest.mark.parametrize("raw", [None, {}])
    def test_defaults(self, raw: object) -> None:
        """No table (or an empty one) gives spawn/fork."""
        assert load_config(raw) == ToolsConfig(fresh_provider="spawn", fork_provider="fork")

    def test_overrides(self) -> None:
        """Configured provider names are kept."""
        config = load_config({"fresh_provider": "team-fresh", "fork_provider": "team-fork"})
        assert (config.provider_for("fresh"), config.provider_for("fork")) == ("team-fresh", "team-fork")

    def test_unknown_key(self) -> None:
        """An unknown key fails naming the key and the table path."""
        with pytest.raises(ConfigError) as info:
            load_config({"fresh_provider": "spawn", "fork_providr": "fork"})
        assert info.value.code == "CONFIG_INVALID"
        assert "fork_providr" in str(info.value)
        assert info.value.path == "plugins.dsh-team-tools"

    def test_wrong_type_names_the_field(self) -> None:
        """A non-string provider fails with the field path."""
        with pytest.raises(ConfigError) as info:
            load_config({"fresh_provider": 3})
        assert info.value.path == "plugins.dsh-team-tools.fresh_provider"

    def test_blank_provider(self) -> None:
        """A blank provider name is rejected, naming the field."""
        with pytest.raises(ConfigError, match="fork_provider must be a non-empty provider name"):
            load_config({"fork_provider": "  "})

    def test_custom_path(self) -> None:
        """The caller's table path prefixes the error."""
        with pytest.raises(ConfigError) as info:
            load_config({"x": 1}, path="profiles.agent-teams.dsh-team-tools")
        assert info.value.path == "profiles.agent-teams.dsh-team-tools"
