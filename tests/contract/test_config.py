"""``host_spec.config.structure_config``: plugin config tables validated with field paths."""

from __future__ import annotations

from typing import Any, Literal

import attrs
import pytest

from host_spec.config import structure_config
from host_spec.errors import ConfigError


@attrs.frozen
class Limits:
    max_members: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    ratio: float = 1.0
    name: str | None = None
    verbose: bool = False
    mode: Literal["fresh", "fork"] = "fresh"
    tags: list[str] = attrs.Factory(list)
    extra: dict[str, Any] = attrs.Factory(dict)


def fails(raw: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        structure_config(Limits, raw, "plugins.demo")
    assert info.value.code == "CONFIG_INVALID"
    return info.value


class TestStructureConfig:
    def test_defaults_and_values(self) -> None:
        """An empty (or missing) table gives the defaults; given values are kept, ints widen to float."""
        assert structure_config(Limits, None, "p") == Limits()
        assert structure_config(Limits, {"max_members": 3, "ratio": 2, "tags": ["a"]}, "p") == Limits(
            max_members=3, ratio=2.0, tags=["a"]
        )

    def test_unknown_key_names_the_table(self) -> None:
        """A misspelt key is reported with the table path."""
        error = fails({"max_memebrs": 3})
        assert str(error) == "extra fields found (max_memebrs) @ plugins.demo"
        assert error.path == "plugins.demo"

    @pytest.mark.parametrize(
        ("raw", "message"),
        [
            ({"max_members": 1.5}, "expected an integer, got float @ plugins.demo.max_members"),
            ({"max_members": "8"}, "expected an integer, got str @ plugins.demo.max_members"),
            ({"max_members": True}, "expected an integer, got bool @ plugins.demo.max_members"),
            ({"ratio": "x"}, "expected a number, got str @ plugins.demo.ratio"),
            ({"name": 3}, "expected a string, got int @ plugins.demo.name"),
            ({"verbose": 1}, "expected a boolean, got int @ plugins.demo.verbose"),
            ({"mode": "clone"}, "expected one of 'fresh', 'fork' @ plugins.demo.mode"),
            ({"tags": ["a", 2]}, "expected a string, got int @ plugins.demo.tags[1]"),
        ],
    )
    def test_wrong_types_are_never_coerced(self, raw: dict[str, Any], message: str) -> None:
        """A value of the wrong type fails with its exact field path instead of being coerced."""
        error = fails(raw)
        assert str(error) == message
        assert error.path == message.rsplit(" @ ", 1)[1]

    def test_validator_message_names_the_field(self) -> None:
        """An attrs validator failure keeps its message, which names the field."""
        assert "'max_members' must be >= 1: 0" in str(fails({"max_members": 0}))

    def test_every_problem_is_listed(self) -> None:
        """Several problems are reported together; ``path`` is the first one's."""
        error = fails({"ratio": "x", "bogus": 1})
        assert "plugins.demo.ratio" in str(error) and "extra fields found (bogus)" in str(error)

    def test_not_a_table(self) -> None:
        """A scalar where a table belongs is rejected at the table's path."""
        assert str(fails(3)) == "expected a table, got int @ plugins.demo"

    def test_mapping_keys_render_dotted(self) -> None:
        """Nested mapping keys appear as dotted path parts."""

        @attrs.frozen
        class Nested:
            tables: dict[str, Limits] = attrs.Factory(dict)

        with pytest.raises(ConfigError) as info:
            structure_config(Nested, {"tables": {"a-b": {"ratio": "x"}}}, "root")
        assert str(info.value) == "expected a number, got str @ root.tables.a-b.ratio"
