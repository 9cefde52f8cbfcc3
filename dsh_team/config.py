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

``checks`` names quality checks a task may list by name (``test = "make test"``);
``gates`` holds the Team-wide gates every completion must pass
(``on_complete = ["make test"]``) and the time each command may take; and
``plan_approval`` is the default of ``spawn_teammate``'s ``plan_approval`` (see
:mod:`dsh_team.controls`).

``workspace_mode`` is where teammates work (a role may choose its own): ``shared``
(the Lead's checkout, the default) or ``worktree`` (each its own git worktree and
branch, merged when its task completes; :mod:`dsh_team.worktrees`).
``keep_worktrees`` keeps merged worktrees when the Team ends instead of removing them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from host_spec.config import structure_config
from host_spec.errors import ConfigError

from dsh_team.errors import TeamConfigError

__all__ = ["LIMIT_FIELDS", "WORKSPACE_MODES", "MAX_SAFE_INTEGER", "BudgetConfig", "GatesConfig", "TeamConfig", "is_safe_positive_int"]

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


def _count(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not (type(value) is int and 0 <= value <= MAX_SAFE_INTEGER):
        raise TeamConfigError(f"{attribute.name} must be zero or a positive safe integer", path=attribute.name)


def _flag(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not bool:
        raise TeamConfigError(f"{attribute.name} must be a boolean", path=attribute.name)


#: The workspace modes a Team, or a role, may choose.
WORKSPACE_MODES: Final = ("shared", "worktree")


def _workspace_mode(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in WORKSPACE_MODES:
        raise TeamConfigError(f'{attribute.name} must be "shared" or "worktree", got {value!r}', path=attribute.name)


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


def _commands(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not all(type(command) is str and command.strip() for command in value):
        raise ValueError(f"{attribute.name} must be a list of non-empty commands")


@attrs.frozen(kw_only=True)
class GatesConfig:
    """Team-wide quality gates (the ``gates`` table).

    Attributes:
        on_complete: Checks every task must pass to complete, after its own (commands
            or names from ``checks``).
        timeout_ms: The time each check command may run before its process group is
            killed (the run fails); at most the workspace's ``bash_max_timeout_ms``.
        tail_chars: Characters of a check's output kept in its record and shown to the member.
    """

    on_complete: tuple[str, ...] = attrs.field(default=(), converter=tuple, validator=_commands)
    timeout_ms: int = attrs.field(default=120_000, validator=_limit)
    tail_chars: int = attrs.field(default=2000, validator=_limit)


def _structure_gates(raw: Any) -> GatesConfig:
    """The ``gates`` table as :class:`GatesConfig`; errors name ``gates.<field>``."""
    if isinstance(raw, GatesConfig):
        return raw
    if not isinstance(raw, Mapping):
        raise TeamConfigError("gates must be a table", path="gates")
    for key in raw:
        if key not in {f.name for f in attrs.fields(GatesConfig)}:
            raise TeamConfigError(f'unknown gates key "{key}"', path=f"gates.{key}")
    if "on_complete" in raw and not isinstance(raw["on_complete"], (list, tuple)):
        raise TeamConfigError("on_complete must be a list of commands", path="gates.on_complete")
    try:
        return GatesConfig(**raw)
    except (TeamConfigError, ValueError) as exc:
        field = getattr(exc, "path", None) or str(exc).split(" ", 1)[0]
        raise TeamConfigError(str(getattr(exc, "message", exc)), path=f"gates.{field}") from None


def _structure_checks(raw: Any) -> Mapping[str, str]:
    """The ``checks`` table: check name -> command; errors name ``checks.<name>``."""
    if not isinstance(raw, Mapping):
        raise TeamConfigError("checks must be a table of name = command", path="checks")
    for name, command in raw.items():
        if type(command) is not str or not command.strip():
            raise TeamConfigError(f'check "{name}" must be a non-empty command', path=f"checks.{name}")
    return dict(raw)


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
        checks: Named quality checks: name -> command (a task's check may name one).
        gates: Team-wide gates (:class:`GatesConfig`; a raw table is structured).
        plan_approval: Whether a teammate must have its plan approved before it may
            write (``spawn_teammate``'s default).
        roles: Role presets by name (``[plugins.dsh-team.roles.NAME]``, see
            :mod:`dsh_team.roster.roles`); each is checked at load, its tools at spawn.
        workspace_mode: ``shared`` or ``worktree`` (see the module docstring).
        keep_worktrees: Keep members' worktrees when the Team ends, merged or not.
        checkpoint_every: Save the Team's checkpoint (:mod:`dsh_team.checkpoint`)
            after this many Lead-log events since the last one, besides at every clean
            stop; ``0`` saves only at a clean stop. A cold start folds only the events
            after the newest valid checkpoint.

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
    checks: Mapping[str, str] = attrs.field(factory=dict, converter=_structure_checks)
    gates: GatesConfig = attrs.field(factory=GatesConfig, converter=_structure_gates)
    plan_approval: bool = attrs.field(default=False, validator=_flag)
    roles: Mapping[str, Any] = attrs.field(factory=dict, converter=_structure_roles)
    workspace_mode: str = attrs.field(default="shared", validator=_workspace_mode)
    keep_worktrees: bool = attrs.field(default=False, validator=_flag)
    checkpoint_every: int = attrs.field(default=10_000, validator=_count)

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
