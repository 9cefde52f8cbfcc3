"""TeamConfig: defaults, positive safe integer limits, and raw-table parsing."""

from __future__ import annotations

import pytest

from dsh_team.config import LIMIT_FIELDS, MAX_SAFE_INTEGER, TeamConfig, is_safe_positive_int
from dsh_team.errors import TeamConfigError, TeamError
from host_spec.errors import ConfigError


class TestDefaults:
    def test_defaults_follow_the_second_generation(self) -> None:
        """A config built with no arguments has G2's limits and Team mode on by default."""
        config = TeamConfig()
        assert (
            config.max_members,
            config.max_tasks,
            config.max_pending_messages_per_member,
            config.max_message_bytes,
            config.disposal_timeout_ms,
            config.team_mode_default,
        ) == (16, 256, 64, 65536, 5000, True)

    def test_empty_or_missing_table_gives_defaults(self) -> None:
        """``None`` and ``{}`` both resolve to the defaults."""
        assert TeamConfig.from_mapping(None) == TeamConfig() == TeamConfig.from_mapping({})

    def test_table_overrides_selected_fields(self) -> None:
        """Keys present in the table replace their defaults; others keep theirs."""
        config = TeamConfig.from_mapping({"max_members": 8, "team_mode_default": False})
        assert config.max_members == 8 and config.team_mode_default is False and config.max_tasks == 256


class TestLimits:
    @pytest.mark.parametrize("field", LIMIT_FIELDS)
    @pytest.mark.parametrize("value", [0, -1, 1.5, 2.0, 2**53, "x", True, None])
    def test_each_limit_must_be_a_positive_safe_integer(self, field: str, value: object) -> None:
        """Zero, negatives, floats, 2**53, strings, booleans and None are rejected by name."""
        with pytest.raises(TeamConfigError) as caught:
            TeamConfig.from_mapping({field: value})
        error = caught.value
        assert error.code == "TEAM_INVALID_CONFIG"
        assert error.message == f"{field} must be a positive safe integer"
        assert error.path == field
        assert isinstance(error, TeamError) and isinstance(error, ConfigError)

    @pytest.mark.parametrize("field", LIMIT_FIELDS)
    def test_bounds_are_accepted(self, field: str) -> None:
        """1 and 2**53 - 1 are both valid limits."""
        assert getattr(TeamConfig(**{field: 1}), field) == 1
        assert getattr(TeamConfig(**{field: MAX_SAFE_INTEGER}), field) == MAX_SAFE_INTEGER

    @pytest.mark.parametrize("value", [1, 0, "yes", None])
    def test_team_mode_default_must_be_boolean(self, value: object) -> None:
        """Only a real boolean selects the default Team mode."""
        with pytest.raises(TeamConfigError, match="team_mode_default must be a boolean"):
            TeamConfig(team_mode_default=value)  # type: ignore[arg-type]

    def test_is_safe_positive_int(self) -> None:
        """The predicate accepts exactly ints in 1..2**53-1 (not bools)."""
        assert [is_safe_positive_int(v) for v in (1, MAX_SAFE_INTEGER, 0, 2**53, True, 1.0)] == [
            True,
            True,
            False,
            False,
            False,
            False,
        ]


class TestRawTable:
    def test_unknown_key_is_named(self) -> None:
        """A key the config does not know fails with its name as path."""
        with pytest.raises(TeamConfigError) as caught:
            TeamConfig.from_mapping({"maxMembers": 3})
        assert caught.value.path == "maxMembers"
        assert 'unknown Team config key "maxMembers"' in caught.value.message

    def test_non_table_is_rejected(self) -> None:
        """A config that is not a mapping fails with TEAM_INVALID_CONFIG."""
        with pytest.raises(TeamConfigError, match="must be a table, got list") as caught:
            TeamConfig.from_mapping([("max_tasks", 1)])  # type: ignore[arg-type]
        assert caught.value.code == "TEAM_INVALID_CONFIG"

    def test_config_is_frozen(self) -> None:
        """A validated config cannot be changed afterwards."""
        config = TeamConfig()
        with pytest.raises(AttributeError):
            config.max_tasks = 3  # type: ignore[misc]


class TestControls:
    def test_defaults_run_no_gate_and_gate_no_teammate(self) -> None:
        config = TeamConfig()
        assert (config.checks, config.gates.on_complete, config.plan_approval) == ({}, (), False)
        assert (config.gates.timeout_ms, config.gates.tail_chars) == (120_000, 2000)

    def test_tables_are_structured(self) -> None:
        from dsh_team.config import GatesConfig

        config = TeamConfig.from_mapping(
            {"checks": {"test": "make test"}, "gates": {"on_complete": ["test"], "timeout_ms": 5}, "plan_approval": True}
        )
        assert config.checks == {"test": "make test"} and config.gates == GatesConfig(on_complete=("test",), timeout_ms=5)
        assert TeamConfig(gates=config.gates).gates is config.gates

    @pytest.mark.parametrize(
        ("raw", "path"),
        [
            ({"gates": 3}, "gates"),
            ({"gates": {"later": []}}, "gates.later"),
            ({"gates": {"on_complete": "make"}}, "gates.on_complete"),
            ({"gates": {"on_complete": [""]}}, "gates.on_complete"),
            ({"gates": {"on_complete": [1]}}, "gates.on_complete"),
            ({"gates": {"timeout_ms": 0}}, "gates.timeout_ms"),
            ({"gates": {"tail_chars": True}}, "gates.tail_chars"),
            ({"checks": ["make"]}, "checks"),
            ({"checks": {"unit": ""}}, "checks.unit"),
            ({"checks": {"unit": 1}}, "checks.unit"),
            ({"plan_approval": "yes"}, "plan_approval"),
        ],
    )
    def test_a_bad_value_names_its_path(self, raw: dict[str, object], path: str) -> None:
        with pytest.raises(TeamConfigError) as caught:
            TeamConfig.from_mapping(raw)
        assert caught.value.path == path and caught.value.code == "TEAM_INVALID_CONFIG"
