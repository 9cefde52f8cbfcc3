"""``dsh plugins``: what a profile loads, where each plugin comes from, and its config.

Why a command of its own: a profile is layered (``extends``, ``disable``, tables that
replace earlier ones), so what actually loads is not what any one file says. This
resolves the profile exactly as ``dsh run`` would, without starting a host, and shows
each plugin's config *after defaults* when the plugin says how to compute them: a
plugin module may define ``effective_config(raw) -> Mapping`` (the raw table validated
and completed, raising ``ConfigError`` naming the field when it is invalid). Plugins
without it show their table as written.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from host_spec.errors import PluginError
from host_spec.host.plugins.discovery import discover
from host_spec.host.plugins.profiles import load_profile

__all__ = ["add_parser", "describe", "render"]


def add_parser(commands: Any) -> None:
    """Register the ``plugins`` subcommand on the ``dsh`` parser."""
    sub = commands.add_parser("plugins", help="list the plugins a profile loads, in load order",
                              description="Resolve a profile and list its plugins: origin, version, config "
                                          "after defaults, and what is disabled.")
    sub.add_argument("--profile", default="headless", help="built-in profile name or path to a .toml")
    sub.add_argument("--json", action="store_true", help="print one JSON document")


def _effective(module: Any, raw: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    compute: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = getattr(module, "effective_config", None)
    if compute is None:
        return dict(raw), False
    return dict(compute(raw)), True


def describe(spec: str) -> dict[str, Any]:
    """The resolved profile as one JSON-ready document.

    Raises:
        DshError: the profile or a plugin's config table is invalid (the plugin's own
            code, e.g. ``CONFIG_INVALID`` or ``TEAM_INVALID_CONFIG``, naming the field).
        PluginError: a listed plugin is not installed or fails to import.
    """
    profile = load_profile(spec)
    found = discover()
    plugins = []
    for order, entry in enumerate(profile.plugins, start=1):
        ep = found.get(entry.name)
        if ep is None:
            raise PluginError(f'unknown plugin "{entry.name}"')
        try:
            module = ep.load()
        except Exception as exc:
            raise PluginError(f'plugin "{entry.name}" failed to import: {type(exc).__name__}: {exc}') from exc
        config, defaults = _effective(module, entry.config)
        dist = ep.dist
        plugins.append({
            "order": order, "name": entry.name, "entry_point": ep.value,
            "distribution": dist.name if dist is not None else None,
            "version": dist.version if dist is not None else None,
            "config": config, "defaults_applied": defaults,
        })
    return {"version": 1, "profile": profile.name, "description": profile.description,
            "sources": list(profile.sources), "plugins": plugins, "disabled": list(profile.disabled),
            "models": dict(profile.models), "sandbox": attrs.asdict(profile.sandbox)}


def render(doc: Mapping[str, Any]) -> str:
    """The human-readable listing of :func:`describe`'s document."""
    lines = [f"Profile {doc['profile']}" + (f": {doc['description']}" if doc["description"] else "")]
    lines += [f"  from {source}" for source in doc["sources"]]
    lines.append("")
    lines.append("Plugins (load order; unload is the reverse)")
    for plugin in doc["plugins"]:
        origin = f"{plugin['distribution']} {plugin['version']}" if plugin["distribution"] else "?"
        lines.append(f"  {plugin['order']}. {plugin['name']}  {plugin['entry_point']}  ({origin})")
        note = "" if plugin["defaults_applied"] else "  (as written; the plugin declares no defaults)"
        if not plugin["config"]:
            lines.append(f"       config: (empty){note}")
        for key, value in plugin["config"].items():
            lines.append(f"       {key} = {json.dumps(value)}{note}")
            note = ""
    lines.append("")
    lines.append("Disabled: " + (", ".join(doc["disabled"]) or "(none)"))
    if doc["models"]:
        lines.append("Models: " + ", ".join(f"{pattern} -> {spec}" for pattern, spec in doc["models"].items()))
    sandbox = doc["sandbox"]
    lines.append(f"Sandbox: {sandbox['policy']}, network {'on' if sandbox['network'] else 'off'}"
                 + "".join(f"; {pattern}: {json.dumps(override)}" for pattern, override in sandbox["members"].items()))
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    """The command's handler: print the listing (or ``--json``); 0 on success."""
    doc = describe(args.profile)
    print(json.dumps(doc, indent=2) if args.json else render(doc))
    return 0
