"""Sandbox policies: the profile's ``[sandbox]`` table and the effective policy of one member.

Three policies (Codex's names and meaning):

* ``read-only``: the whole filesystem read-only, network off; only a private
  ``/tmp`` and an empty home are writable (both gone when the command ends).
* ``workspace-write`` (the default for every member, the Lead too): the member's
  workspace root is writable as well, except ``.git``, ``.dsh`` and the profile's
  ``protected`` paths inside it.
* ``full``: no sandbox at all. Only a profile that says so explicitly gets it; the
  run's header names every member that runs unsandboxed.

Under every policy but ``full`` the run's own data (its data dir, the store's
socket directory) is hidden: neither readable nor writable. A member that could
write the Lead's log could forge any Team record past the invariant.

Overrides come in two kinds, both in the profile, the user's file:

* by role (``[sandbox.roles."reviewer"]``): every teammate spawned with that role
  (the role's name is kept in the child's descriptor, so a resumed or remote member
  keeps it). The role's own definition (its ``.dsh/roles`` file, which a repository
  may ship) cannot name a policy: a model choosing a role only chooses among
  policies the user wrote down.
* by member-name pattern (``[sandbox.members."review*"]``, like ``[models]``):
  the host knows a child's name when it starts.

Each key is taken from the most specific table that sets it: the member pattern
(first match in file order), else the member's role, else ``[sandbox]`` itself.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from host_spec.config import structure_config
from host_spec.errors import ConfigError

__all__ = ["PolicyName", "POLICIES", "MemberOverride", "SandboxSettings", "Policy", "load_settings", "layered",
           "ALWAYS_PROTECTED", "looks_secret"]

PolicyName = Literal["read-only", "workspace-write", "full"]
POLICIES: Final = ("read-only", "workspace-write", "full")
#: Paths inside a workspace that stay read-only under ``workspace-write`` (when they exist).
ALWAYS_PROTECTED: Final = (".git", ".dsh")

_SECRET_MARKS: Final = ("API_KEY", "APIKEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "ACCESS_KEY", "PRIVATE_KEY",
                        "CREDENTIAL", "PGPASS")
_SECRET_PREFIXES: Final = ("OPENAI_", "ANTHROPIC_", "AZURE_OPENAI", "GEMINI_", "GOOGLE_API", "MISTRAL_", "GROQ_",
                           "COHERE_", "DEEPSEEK_", "OPENROUTER_", "TOGETHER_", "HF_", "HUGGING", "AWS_", "DSH_STORE")


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name marks a credential or a model provider's key."""
    upper = name.upper()
    return any(mark in upper for mark in _SECRET_MARKS) or upper.startswith(_SECRET_PREFIXES)


def _not_negative(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be 0 (no limit) or more")


def _relative_paths(instance: Any, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]) -> None:
    for path in value:
        parts = path.replace("\\", "/").split("/")
        if not path or path.startswith(("/", "~")) or ".." in parts or "\x00" in path:
            raise ValueError(f"{attribute.name}: {path!r} must be a relative path without '..'")


def _env_names(instance: Any, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]) -> None:
    for name in value:
        if not name or "=" in name or "\x00" in name:
            raise ValueError(f"env: {name!r} is not a variable name")
        if looks_secret(name):
            raise ValueError(f"env: {name} looks like a credential; the sandbox never passes one")


_ROLE_NAME: Final = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def _role_names(instance: Any, attribute: attrs.Attribute[Mapping[str, Any]], value: Mapping[str, Any]) -> None:
    for name in value:
        if not _ROLE_NAME.match(name):
            raise ValueError(f"roles: {name!r} is not a role name (lower-case letters, digits, - and _)")


@attrs.frozen
class MemberOverride:
    """``[sandbox.members."PATTERN"]`` or ``[sandbox.roles."NAME"]``: what differs for those members.

    Attributes:
        policy: The member's policy instead of the profile's.
        network: Whether the member's commands may use the network.
    """

    policy: PolicyName | None = None
    network: bool | None = None


@attrs.frozen
class SandboxSettings:
    """The profile's ``[sandbox]`` table.

    Attributes:
        policy: Every member's policy unless a ``members`` pattern says otherwise.
        network: Whether sandboxed commands may use the network (a shared network namespace).
        protected: Workspace-relative paths kept read-only under ``workspace-write``
            and refused to the file tools (``.git`` and ``.dsh`` always are).
        home_paths: Paths relative to the user's home made visible (read-only) in the
            otherwise empty home (``.gitconfig``, ``.cargo/bin``).
        env: Environment variables passed besides the fixed allowlist (never a credential).
        memory_mb: Memory (heap and private writable mappings, ``RLIMIT_DATA``) of each
            process of a command (0: none).
        max_processes: Processes a command may have at once (0: none).
        members: Member-name pattern (``fnmatch``, first match in file order) -> override.
        roles: Role name -> override, for members spawned with that role.
    """

    policy: PolicyName = "workspace-write"
    network: bool = False
    protected: tuple[str, ...] = attrs.field(default=(), validator=_relative_paths)
    home_paths: tuple[str, ...] = attrs.field(default=(), validator=_relative_paths)
    env: tuple[str, ...] = attrs.field(default=(), validator=_env_names)
    memory_mb: int = attrs.field(default=8192, validator=_not_negative)
    max_processes: int = attrs.field(default=512, validator=_not_negative)
    members: Mapping[str, MemberOverride] = attrs.Factory(dict)
    roles: Mapping[str, MemberOverride] = attrs.field(factory=dict, validator=_role_names)

    def policy_for(self, member: str | None, role: str | None = None) -> Policy:
        """The effective policy of ``member`` spawned with ``role`` (``None``: the profile's own, e.g. for an
        MCP server; a member without a role)."""
        name, network = self.policy, self.network
        layers = [self.roles.get(role)] if role is not None else []
        if member is not None:
            layers.append(next((o for p, o in self.members.items() if fnmatch.fnmatchcase(member, p)), None))
        for override in layers:  # the most specific last: a member's pattern over its role
            if override is not None:
                name = override.policy if override.policy is not None else name
                network = override.network if override.network is not None else network
        return Policy(name=name, network=network, protected=(*ALWAYS_PROTECTED, *self.protected),
                      home_paths=self.home_paths, env=self.env, memory_mb=self.memory_mb,
                      max_processes=self.max_processes)

    def overrides(self) -> dict[str, MemberOverride]:
        """Every override, named as the run's header shows it (``role NAME``, or the member pattern)."""
        return {**{f"role {name}": o for name, o in self.roles.items()}, **self.members}

    def needs_sandbox(self) -> bool:
        """Whether any member's policy needs bubblewrap (every policy but ``full``)."""
        return self.policy != "full" or any(o.policy not in (None, "full") for o in self.overrides().values())

    def unsandboxed(self) -> tuple[str, ...]:
        """Who runs with ``full``: ``"every member"``, or the roles and member patterns that do."""
        if self.policy == "full":
            kept = [p for p, o in self.overrides().items() if o.policy not in (None, "full")]
            return ("every member" + (f" except {', '.join(kept)}" if kept else ""),)
        return tuple(who for who, override in self.overrides().items() if override.policy == "full")


@attrs.frozen
class Policy:
    """The effective policy of one command.

    Attributes:
        name: ``read-only``, ``workspace-write`` or ``full``.
        network: The command shares the host's network.
        protected: Workspace-relative paths kept read-only (and refused to the file tools).
        home_paths: Home-relative paths visible in the empty home.
        env: Extra environment variable names passed.
        memory_mb: Memory limit per process (``RLIMIT_DATA``; 0: none).
        max_processes: Process-count limit (0: none).
    """

    name: PolicyName
    network: bool = False
    protected: tuple[str, ...] = ALWAYS_PROTECTED
    home_paths: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    memory_mb: int = 0
    max_processes: int = 0

    @property
    def sandboxed(self) -> bool:
        return self.name != "full"

    @property
    def writes_workspace(self) -> bool:
        return self.name != "read-only"


def load_settings(raw: Mapping[str, Any] | None, path: str = "sandbox") -> SandboxSettings:
    """Validate a ``[sandbox]`` table (``None``: the defaults).

    Raises:
        ConfigError: an unknown key, a wrong type, an unknown policy, an absolute or
            ``..`` path, a credential-like ``env`` name -- naming the field path.
    """
    try:
        return structure_config(SandboxSettings, raw, path)
    except ConfigError as exc:
        # attrs validators run on the whole class; their messages start with the field's name.
        field = exc.message.split(":", 1)[0].split(" ", 1)[0]
        if exc.path != path or field not in attrs.fields_dict(SandboxSettings):
            raise
        raise ConfigError(exc.message.replace(f" @ {path}", f" @ {path}.{field}"), path=f"{path}.{field}") from None


def layered(earlier: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """A later profile layer's ``[sandbox]`` keys over an earlier one's (``members`` per pattern, ``roles`` per
    name)."""
    merged = {**earlier, **layer}
    for table in ("members", "roles"):
        before, now = earlier.get(table), layer.get(table)
        if isinstance(before, Mapping) and isinstance(now, Mapping):
            merged[table] = {**before, **now}
    return merged
