"""TOML profiles: which plugins a host registers, with which config tables.

A profile is a built-in name (``headless``, ``agent-teams``; files in
``host_spec/host/profiles/``) or a path to a ``.toml`` file. A file holds::

    extends = "headless"            # optional: a built-in name or a path (relative to this file)
    description = "..."             # optional
    disable = ["subagent-control"]  # optional: entry names to switch off
    [plugins.dsh-team]              # one table per plugin entry name; the table IS its config
    max_members = 8
    [models]                        # optional: member-name pattern -> model spec
    "review*" = "openai:gpt-4o-mini"
    [compaction]                    # optional: when model contexts are compacted
    threshold = 0.8                 # share of the context window that triggers it
    recent_share = 0.25             # share kept verbatim as recent turns
    [compaction.windows]            # model-spec pattern -> context window (tokens)
    "scripted:*" = 8000
    [sandbox]                       # optional: how members' commands are sandboxed
    policy = "workspace-write"      # read-only | workspace-write (default) | full (no sandbox)
    [sandbox.members."review*"]     # member-name pattern -> its own policy / network
    policy = "read-only"
    [mcp.servers.docs]              # optional: an MCP server every member gets the tools of
    command = "python"              # stdio (command/args/env), or url = "http://..." (streamable HTTP)
    args = ["docs_server.py"]
    [permissions]                   # optional: which tool calls run, are asked about, or are refused
    default = "ask"                 # "allow" (the built-in profiles) or "ask"
    allow = ["bash(pytest *)", "read_file"]
    deny = ["bash(rm *)"]

A ``[models]`` entry gives every child whose name matches the pattern
(``fnmatch``, first match in file order) its own model; other children keep their
parent's. Later layers override an earlier layer's pattern and append new ones.
``[compaction]`` keys override an earlier layer's one by one (``windows`` per pattern);
a model with no configured window compacts only if its adapter reports one.
``[permissions]`` keys override an earlier layer's one by one (a layer's ``allow``
list replaces the earlier list); see ``host_spec.permissions`` for the rules.
``[mcp.servers.NAME]`` tables replace an earlier layer's table of the same server
and append new ones (``[mcp] files = [".mcp.json"]`` first adds a file's
``mcpServers``, paths relative to the profile file; the layer's own tables win); when any server is configured (and ``mcp`` is not disabled)
the ``mcp`` plugin is loaded first, so it unloads last: members still running at
shutdown keep their servers until they are settled. A profile without servers
never loads it.

Layering (later wins per plugin): the ``extends`` chain is resolved base first; each
layer first removes the names it disables, then sets its plugin tables. A table
replaces an earlier table for the same plugin wholesale (no deep merge, so a layer
states a plugin's complete config) and keeps that plugin's load position; a new
plugin is appended. Plugins load in the resulting order and unload in reverse.

Why validate here and not in the loader: a typo in a profile must fail before any
plugin runs, naming the file and the field (``unknown plugin "dsh-teams" @
plugins.dsh-teams``). Plugin config *contents* are validated by each plugin on load
with :func:`host_spec.config.structure_config`, because only the plugin knows its
schema.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from host_spec import ENTRY_POINT_GROUP
from host_spec.config import structure_config
from host_spec.errors import ConfigError
from host_spec.permissions import PermissionSettings, settings_from

from host_spec.host.agents.window import CompactionSettings
from host_spec.host.sandbox.policy import SandboxSettings, layered, load_settings

__all__ = ["PluginEntry", "Profile", "builtin_profiles", "load_profile", "known_plugin_names", "MCP_PLUGIN"]

BUILTIN_DIR = Path(__file__).with_name("profiles")
#: The plugin a profile's ``[mcp.servers]`` tables load.
MCP_PLUGIN = "mcp"


@attrs.frozen
class _ProfileFile:
    """One profile file as written (before layering)."""

    extends: str | None = None
    description: str = ""
    disable: list[str] = attrs.Factory(list)
    plugins: dict[str, dict[str, Any]] = attrs.Factory(dict)
    models: dict[str, str] = attrs.Factory(dict)
    compaction: dict[str, Any] = attrs.Factory(dict)
    mcp: dict[str, Any] = attrs.Factory(dict)
    permissions: dict[str, Any] = attrs.Factory(dict)
    store: dict[str, Any] = attrs.Factory(dict)  # [store] url: read by host_spec.host.store.selection
    sandbox: dict[str, Any] = attrs.Factory(dict)  # [sandbox]: host_spec.host.sandbox.policy


@attrs.frozen
class PluginEntry:
    """One plugin the profile registers: its entry-point name and raw config table."""

    name: str
    config: Mapping[str, Any]


@attrs.frozen
class Profile:
    """A resolved profile: the plugins to load, in load order.

    Attributes:
        name: What the user asked for (built-in name or path).
        plugins: Entries in load order (unload is the reverse).
        disabled: Names some layer switched off and no later layer re-enabled.
        sources: The files layered, base first.
        description: The description of the outermost file.
        models: Member-name pattern -> model spec, in match order.
        compaction: When the host compacts a model context.
        sandbox: How members' commands are sandboxed (``[sandbox]``; keys layer one by one).
        permissions: Which tool calls run, are asked about, or are refused.
    """

    name: str
    plugins: tuple[PluginEntry, ...]
    disabled: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    description: str = ""
    models: Mapping[str, str] = attrs.field(factory=lambda: MappingProxyType({}))
    compaction: CompactionSettings = attrs.Factory(CompactionSettings)
    sandbox: SandboxSettings = attrs.Factory(SandboxSettings)
    permissions: PermissionSettings = attrs.Factory(PermissionSettings)

    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.plugins)

    def config(self, name: str) -> Mapping[str, Any] | None:
        """The config table of ``name``, or ``None`` when the profile does not load it."""
        for entry in self.plugins:
            if entry.name == name:
                return entry.config
        return None


def builtin_profiles() -> list[str]:
    """Names of the profiles shipped with the host, sorted."""
    return sorted(path.stem for path in BUILTIN_DIR.glob("*.toml"))


def known_plugin_names() -> frozenset[str]:
    """Entry-point names of group ``dsh`` installed in this environment."""
    from importlib.metadata import entry_points

    return frozenset(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def _is_path(spec: str) -> bool:
    return spec.endswith(".toml") or os.sep in spec or "/" in spec


def _locate(spec: str, base_dir: Path | None) -> Path:
    if _is_path(spec):
        path = Path(spec).expanduser()
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        return path
    path = BUILTIN_DIR / f"{spec}.toml"
    if not path.is_file():
        builtins = ", ".join(builtin_profiles())
        raise ConfigError(
            f'unknown profile "{spec}" (built-in profiles: {builtins}; or give a path to a .toml file)',
            path="profile",
        )
    return path


def _read(path: Path, label: str) -> _ProfileFile:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"profile {label}: cannot read {path}: {exc.strerror or exc}", path="profile") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"profile {label}: invalid TOML: {exc}", path="profile") from None
    try:
        return structure_config(_ProfileFile, raw, "$")
    except ConfigError as exc:
        message = exc.message.replace("@ $.", "@ ").replace("@ $", "@ <top level>")
        raise ConfigError(f"profile {label}: {message}", path=exc.path.removeprefix("$.")) from None


def _check_known(name: str, known: Collection[str], label: str, path: str) -> None:
    if name not in known:
        raise ConfigError(f'profile {label}: unknown plugin "{name}" @ {path}', path=path)


def _resolve(
    spec: str, base_dir: Path | None, known: Collection[str], chain: tuple[Path, ...], sandbox: dict[str, Any]
) -> tuple[dict[str, Mapping[str, Any]], set[str], list[str], str, dict[str, str], dict[str, Any], dict[str, Any],
           dict[str, Any]]:
    path = _locate(spec, base_dir).resolve()
    label = spec if not _is_path(spec) else str(path)
    if path in chain:
        cycle = " -> ".join(str(p) for p in (*chain, path))
        raise ConfigError(f"profile {label}: extends itself ({cycle})", path="extends")
    layer = _read(path, label)
    if layer.extends is not None:
        plugins, disabled, sources, _, models, compaction, servers, permissions = _resolve(
            layer.extends, path.parent, known, (*chain, path), sandbox)
    else:
        plugins, disabled, sources, models, compaction, servers, permissions = {}, set(), [], {}, {}, {}, {}
    for index, name in enumerate(layer.disable):
        _check_known(name, known, label, f"disable[{index}]")
        if name in layer.plugins:
            raise ConfigError(
                f'profile {label}: plugin "{name}" is both configured and disabled @ plugins.{name}',
                path=f"plugins.{name}",
            )
        plugins.pop(name, None)
        disabled.add(name)
    for name, table in layer.plugins.items():
        _check_known(name, known, label, f"plugins.{name}")
        plugins[name] = MappingProxyType(dict(table))
        disabled.discard(name)
    for pattern, model in layer.models.items():
        if ":" not in model:
            raise ConfigError(f'profile {label}: model "{model}" is not a KIND:ARGUMENT spec @ models.{pattern}',
                              path=f"models.{pattern}")
        models[pattern] = model
    if layer.compaction:
        earlier, windows = compaction.get("windows"), layer.compaction.get("windows")
        compaction = {**compaction, **layer.compaction}
        if isinstance(earlier, Mapping) and isinstance(windows, Mapping):
            compaction["windows"] = {**earlier, **windows}
        try:
            structure_config(CompactionSettings, compaction, "compaction")
        except ConfigError as exc:
            raise ConfigError(f"profile {label}: {exc.message}", path=exc.path) from None
    if layer.sandbox:
        merged = layered(sandbox, layer.sandbox)
        try:
            load_settings(merged)
        except ConfigError as exc:
            raise ConfigError(f"profile {label}: {exc.message}", path=exc.path) from None
        sandbox.clear()
        sandbox.update(merged)
    if layer.mcp:
        servers = {**servers, **_mcp_servers(layer.mcp, label, path.parent)}
    if layer.permissions:
        permissions = {**permissions, **layer.permissions}
        try:
            settings_from(permissions)
        except ConfigError as exc:
            raise ConfigError(f"profile {label}: {exc.message}", path=exc.path) from None
    sources.append(str(path))
    return plugins, disabled, sources, layer.description, models, compaction, servers, permissions


def _mcp_servers(table: Mapping[str, Any], label: str, base_dir: Path) -> dict[str, Any]:
    """One layer's ``[mcp]`` table checked (no SDK needed): its ``files``' servers, then its own, by name."""
    from host_spec.host.mcp.config import load_config
    from host_spec.host.mcp.mcp_json import read_servers

    servers: dict[str, Any] = {}
    try:
        config = load_config(table)
        for index, name in enumerate(config.files):
            where = f"mcp.files[{index}]"
            found = read_servers((base_dir / Path(name).expanduser()).resolve(), where)
            load_config({"servers": found}, where)
            servers.update(found)
    except ConfigError as exc:
        raise ConfigError(f"profile {label}: {exc.message}", path=exc.path, code=exc.code) from None
    own = table.get("servers", {})
    servers.update(own if isinstance(own, Mapping) else {})
    return servers


def load_profile(spec: str | os.PathLike[str], *, known: Collection[str] | None = None) -> Profile:
    """Read, layer and validate a profile.

    Args:
        spec: A built-in profile name or a path to a ``.toml`` file.
        known: Plugin names that may appear; defaults to the installed entry points.

    Raises:
        ConfigError: unknown profile, unreadable or invalid TOML, an unknown key or a
            wrong type (the message names the file and the field path), an unknown
            plugin, a plugin both configured and disabled in one file, an
            ``extends`` cycle.
    """
    spec = os.fspath(spec)
    names = known_plugin_names() if known is None else known
    sandbox: dict[str, Any] = {}
    plugins, disabled, sources, description, models, compaction, servers, permissions = _resolve(
        spec, None, names, (), sandbox)
    entries = tuple(PluginEntry(name, config) for name, config in plugins.items())
    if servers and MCP_PLUGIN not in disabled and MCP_PLUGIN not in plugins:
        entries = (PluginEntry(MCP_PLUGIN, MappingProxyType({"servers": servers})), *entries)
    return Profile(
        name=spec,
        plugins=entries,
        disabled=tuple(sorted(disabled)),
        sources=tuple(sources),
        description=description,
        models=MappingProxyType(models),
        compaction=structure_config(CompactionSettings, compaction, "compaction"),
        sandbox=load_settings(sandbox),
        permissions=settings_from(permissions),
    )
