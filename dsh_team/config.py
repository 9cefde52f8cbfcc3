"""Deployment limits of the Team service and the Team-mode default.

Defaults are sized for one process driving a handful of teammates
(``max_members`` 16). Each limit must be a positive *safe* integer (at most 2**53 - 1, the range every JSON
reader agrees on); booleans and floats are rejected even when integral, because a
TOML ``true`` or ``1.5`` is a typo, never a limit.

``team_mode_default`` is the Team mode of a root session that has no ``team/mode``
record yet. It defaults to ``True`` because the Agent Teams profile (the only
profile that loads the plugin) should work out of the box; a profile that wants
Teams strictly opt-in per root sets ``team_mode_default = false``.

``budget`` is a nested table of spending limits (:class:`BudgetConfig`); every
limit is off unless set. It is structured with cattrs, so an unknown key or a
wrong type names its path (``budget.member_tokens``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from host_spec.config import structure_config
from host_spec.errors import ConfigError

from dsh_team.errors import TeamConfigError

__all__ = ["LIMIT_FIELDS", "MAX_SAFE_INTEGER", "BudgetConfig", "TeamConfig", "is_safe_positive_int"]

MAX_SAFE_INTEGER: Final = 2**53 - 1

#: The numeric limits (each a positive safe integer).
LIMIT_FIELDS: Final = (
    "max_members",
    "max_tasks",
    "max_pending_messages_per_member",
    "max_message_bytes",
    "disposal_timeout_ms",
    "shutdown_timeout_ms",
)


def is_safe_positive_int(value: Any) -> bool:
    """Whether ``value`` is an ``int`` (not ``bool``) in ``1 .. 2**53 - 1``."""
    return type(value) is int and 1 <= value <= MAX_SAFE_INTEGER


def _limit(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not is_safe_positive_int(value):
        raise TeamConfigError(f"{attribute.name} must be a positive safe integer", path=attribute.name)


def _flag(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not bool:
        raise TeamConfigError(f"{attribute.name} must be a boolean", path=attribute.name)


def _budget_limit(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not is_safe_positive_int(value):
        raise ValueError(f"{attribute.name} must be a positive safe integer or absent")


@attrs.frozen(kw_only=True)
class BudgetConfig:
    """Spending limits of a Team (the ``budget`` table); ``None`` (absent) is no limit.

    Tokens are a model call's input plus output tokens as its server reported them;
    a call counts once its reply reported usage. Reaching a member limit refuses that
    member's next model call; reaching a Team limit refuses every member's and new
    spawns (``TEAM_BUDGET_EXCEEDED``). Raising a limit and resuming lifts it.

    Attributes:
        member_tokens: Tokens per member (the Lead included).
        member_calls: Model calls per member.
        team_tokens: Tokens of the whole Team.
        team_calls: Model calls of the whole Team.
    """

    member_tokens: int | None = attrs.field(default=None, validator=_budget_limit)
    member_calls: int | None = attrs.field(default=None, validator=_budget_limit)
    team_tokens: int | None = attrs.field(default=None, validator=_budget_limit)
    team_calls: int | None = attrs.field(default=None, validator=_budget_limit)


def _structure_budget(raw: Any) -> BudgetConfig:
    """The ``budget`` table as :class:`BudgetConfig`; errors name ``budget.<field>``."""
    if isinstance(raw, BudgetConfig):
        return raw
    try:
        return structure_config(BudgetConfig, raw, "budget")
    except ConfigError as exc:
        path = exc.path
        if path == "budget":  # a failed validator names its field first in the message
            named = [f.name for f in attrs.fields(BudgetConfig) if exc.message.startswith(f.name + " ")]
            path = f"budget.{named[0]}" if named else path
        raise TeamConfigError(exc.message, path=path) from None


def _structure_roles(raw: Any) -> Mapping[str, Any]:
    """The ``roles`` table as a plain dict; each role is checked by the service at load
    (:func:`dsh_team.roster.roles.check_roles`, errors name ``roles.NAME``)."""
    if not isinstance(raw, Mapping):
        raise TeamConfigError("roles must be a table of role tables", path="roles")
    return dict(raw)


@attrs.frozen(kw_only=True)
class TeamConfig:
    """Validated Team service configuration.

    Attributes:
        max_members: Teammate names ever provisioned per Team, failed ones included.
        max_tasks: Non-deleted tasks per Team (tombstones do not count).
        max_pending_messages_per_member: Queued-minus-delivered messages per target.
        max_message_bytes: UTF-8 bytes of one framed delivery (JSON of its content).
        disposal_timeout_ms: Bound of each disposal settlement and child drain.
        shutdown_timeout_ms: How long a teammate has to answer a shutdown request
            before it is stopped (:mod:`dsh_team.roster.shutdown`).
        team_mode_default: Team mode of a root with no ``team/mode`` record and no
            earlier Team records (see the module docstring).
        allow_volatile_store: For tests only: run on a host whose sessions live in
            memory. Off by default because no Team guarantee (nothing accepted is
            lost, delivery exactly once) holds when a flush persists nothing.
        budget: Spending limits (:class:`BudgetConfig`; a raw table is structured).
        roles: Role presets by name (``[plugins.dsh-team.roles.NAME]``, see
            :mod:`dsh_team.roster.roles`); each is checked at load, its tools at spawn.

    Raises:
        TeamConfigError: any field is invalid (``TEAM_INVALID_CONFIG``, ``path`` = field).
    """

    max_members: int = attrs.field(default=16, validator=_limit)
    max_tasks: int = attrs.field(default=256, validator=_limit)
    max_pending_messages_per_member: int = attrs.field(default=64, validator=_limit)
    max_message_bytes: int = attrs.field(default=65536, validator=_limit)
    disposal_timeout_ms: int = attrs.field(default=5000, validator=_limit)
    shutdown_timeout_ms: int = attrs.field(default=120_000, validator=_limit)
    team_mode_default: bool = attrs.field(default=True, validator=_flag)
    allow_volatile_store: bool = attrs.field(default=False, validator=_flag)
    budget: BudgetConfig = attrs.field(factory=BudgetConfig, converter=_structure_budget)
    roles: Mapping[str, Any] = attrs.field(factory=dict, converter=_structure_roles)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> TeamConfig:
        """Build a config from a plugin's raw config table (``ctx.config``).

        Missing keys take their defaults; ``None`` means an empty table.

        Raises:
            TeamConfigError: ``raw`` is not a table, holds an unknown key (named in
                the message and ``path``), or any value is invalid.
        """
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise TeamConfigError(f"Team config must be a table, got {type(raw).__name__}", path="")
        known = {field.name for field in attrs.fields(cls)}
        for key in raw:
            if key not in known:
                raise TeamConfigError(f'unknown Team config key "{key}"', path=str(key))
        return cls(**raw)
