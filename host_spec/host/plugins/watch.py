"""Watch mode: reload exactly the plugins whose source files changed, while the run goes on.

A plugin author edits a module and wants to see the change without killing the team.
The reload machinery (fresh import, scratch validation, teardown, rollback) lives in
:mod:`host_spec.host.plugins.reload`; this module decides *what* to reload and *when*:

* **Which plugin owns a file.** Each loaded plugin has a *namespace*: the shallowest
  package around its entry module that holds no other loaded plugin (``dsh_team`` for
  ``dsh-team``, ``dsh_team.web`` for ``dsh-team-web``, which lives inside it), or, for
  plugins inside the shared ``host_spec`` package, the entry module alone (the contract
  is never re-imported). A changed ``.py`` file belongs to the plugin with the deepest
  namespace around it.
* **Dependency order.** A plugin whose sources import another plugin's namespace at
  module level (a lazy import inside a function binds afresh at each call) is
  reloaded after it (a change to the Team service reloads the tools that call it),
  transitively, in profile load order, because a reloaded package leaves its importers
  holding the old classes.
* **Bursts.** The watcher (``watchfiles``, extra ``dev``) groups the saves of one
  burst into one batch, so an editor writing several files causes one reload each.

A failed reload keeps the loaded version (the reload's own rollback) and stops the
batch, so no dependent is reloaded against a version that did not load. Durable state
is never touched: a reload appends nothing to any session.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from host_spec.host.plugins.reload import in_namespace, package_prefix

if TYPE_CHECKING:
    from host_spec.host.plugins.manager import PluginManager

__all__ = ["WatchedPlugin", "watched_plugins", "affected", "where_broken", "PluginWatcher"]


@attrs.frozen
class WatchedPlugin:
    """One reloadable plugin as watch mode sees it.

    Attributes:
        name: Entry name in the profile.
        module: Its entry module.
        namespace: Module namespace re-imported when it reloads.
        path: Directory of that namespace (a package) or the module file.
        imports: Absolute module names its sources import.
    """

    name: str
    module: str
    namespace: str
    path: Path
    imports: frozenset[str]

    def owns(self, file: Path) -> bool:
        return file == self.path or self.path in file.parents


def _namespace(module: str, others: Sequence[str]) -> str:
    prefix = package_prefix(module)
    parts = module.split(".")
    for depth in range(len(prefix.split(".")), len(parts)):
        candidate = ".".join(parts[:depth])
        if not any(in_namespace(other, candidate) for other in others):
            return candidate
    return prefix


def _location(namespace: str) -> Path | None:
    spec = importlib.util.find_spec(namespace)
    if spec is None or spec.origin is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve()
    return Path(spec.origin).resolve()


def _imports(source: str) -> set[str]:
    """Modules imported when the module runs: a function's lazy import binds afresh at each call."""
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse(source)]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    return found


def watched_plugins(manager: PluginManager) -> list[WatchedPlugin]:
    """The reloadable plugins of ``manager`` in load order (object-registered ones are skipped)."""
    loaded = [(name, manager.get(name)) for name in manager.names()]
    modules = {name: plugin.module for name, plugin in loaded if plugin is not None and plugin.module}
    located: list[tuple[str, str, str, Path]] = []
    for name, module in modules.items():
        namespace = _namespace(module, [other for key, other in modules.items() if key != name])
        path = _location(namespace)
        if path is not None:
            located.append((name, module, namespace, path))
    found: list[WatchedPlugin] = []
    for name, module, namespace, path in located:
        nested = [other for _, _, _, other in located if path in other.parents]  # another plugin's room inside
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        imports: set[str] = set()
        for file in files:
            if any(room in file.parents for room in nested):
                continue
            try:
                imports |= _imports(file.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError):
                continue  # a broken file shows up when its plugin reloads
        found.append(WatchedPlugin(name, module, namespace, path, frozenset(imports)))
    return found


def affected(plugins: Sequence[WatchedPlugin], changed: Iterable[Path], *, extra: Sequence[Path] = ()) -> list[str]:
    """Names to reload for ``changed`` files, dependencies first (load order).

    A ``.py`` file inside a plugin's namespace selects the plugin with the deepest one;
    a change under an ``extra`` watch path that no plugin owns selects every plugin
    (shared code outside the plugins' packages). Importers of a selected plugin's
    namespace are added until nothing changes.
    """
    selected: set[str] = set()
    for file in changed:
        owners = [plugin for plugin in plugins if file.suffix == ".py" and plugin.owns(file)]
        if owners:
            selected.add(max(owners, key=lambda plugin: len(plugin.path.parts)).name)
        elif any(root == file or root in file.parents for root in extra):
            selected.update(plugin.name for plugin in plugins)
    grew = True
    while grew:
        grew = False
        for plugin in plugins:
            if plugin.name in selected:
                continue
            if any(in_namespace(module, other.namespace) for other in plugins if other.name in selected
                   for module in plugin.imports):
                selected.add(plugin.name)
                grew = True
    return [plugin.name for plugin in plugins if plugin.name in selected]


def where_broken(exc: BaseException, root: Path) -> str:
    """``file, line N`` of the edit that broke a reload: a syntax error's, else the deepest frame in ``root``."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, SyntaxError) and cause.filename:
            return f"{cause.filename}, line {cause.lineno}"
        for frame in reversed(traceback.extract_tb(cause.__traceback__)):
            file = Path(frame.filename)
            if file == root or root in file.parents:
                return f"{frame.filename}, line {frame.lineno}"
        cause = cause.__cause__ or cause.__context__
    return str(root)


class PluginWatcher:
    """Reloads the plugins whose files change, printing one line per reload.

    Args:
        manager: The host's plugin manager (``host.plugins``).
        write: Where the lines go (the CLI passes ``print``).
        extra: Further paths to watch (``--watch-path``).
        tool_counts: A snapshot of what each live member sees (the CLI passes its tools).
        compare: How many members differ between two snapshots (whose tools were reinstalled).
    """

    def __init__(self, manager: PluginManager, write: Callable[[str], Any], *, extra: Sequence[Path] = (),
                 tool_counts: Callable[[], Any] = dict,
                 compare: Callable[[Any, Any], int] = lambda before, after: 0) -> None:
        self.manager = manager
        self.write = write
        self.extra = tuple(path.resolve() for path in extra)
        self.tool_counts = tool_counts
        self.compare = compare
        self.reloads = 0

    def paths(self) -> list[Path]:
        """Everything watched: the plugins' namespaces and the extra paths."""
        return [plugin.path for plugin in watched_plugins(self.manager)] + list(self.extra)

    async def apply(self, changed: Iterable[Path]) -> list[str]:
        """Reload what ``changed`` affects, in order; stop at the first failure. Returns the reloaded names."""
        changed = [Path(path).resolve() for path in changed]
        plugins = watched_plugins(self.manager)
        names = affected(plugins, changed, extra=self.extra)
        by_name = {plugin.name: plugin for plugin in plugins}
        done: list[str] = []
        for name in names:
            plugin = by_name[name]
            files = [str(path) for path in changed if plugin.owns(path)] or ["(dependency)"]
            before = self.tool_counts()
            started = time.perf_counter()
            prefix = None if plugin.namespace == package_prefix(plugin.module) else plugin.namespace
            try:
                await self.manager.reload(name, prefix=prefix)
            except Exception as exc:
                # the reload's own message says what happened to the loaded version
                self.write(f"[dsh] {exc} ({where_broken(exc, plugin.path)})")
                break
            members = self.compare(before, self.tool_counts())
            elapsed = (time.perf_counter() - started) * 1000
            self.reloads += 1
            done.append(name)
            self.write(f"[dsh] reloaded {name} ({', '.join(files)}) in {elapsed:.0f} ms; "
                       f"tools reinstalled for {members} member{'s' if members != 1 else ''}")
        return done

    async def run(self, stop: asyncio.Event, *, debounce_ms: int = 400) -> None:
        """Watch until ``stop`` is set, applying each burst of changes as one batch."""
        from watchfiles import awatch

        async for changes in awatch(*self.paths(), stop_event=stop, debounce=debounce_ms * 4,
                                    step=debounce_ms, recursive=True):
            await self.apply(Path(path) for _, path in changes)
