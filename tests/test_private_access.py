"""Tests reach the code under test through public seams only.

A test that reads or patches ``obj._private`` of another module pins an
implementation detail: the next refactoring breaks it without any behaviour
changing, and a patched private attribute can make a test pass against code
that would fail for real. This scan of every file under ``tests/`` fails on:

* ``x._name`` (read, write or call) where ``_name`` is not defined in the same
  file (a file's own helpers may keep private members);
* ``from module import _name`` and ``getattr``/``setattr``/``hasattr``/``delattr``/
  ``monkeypatch.setattr``/``monkeypatch.setitem`` naming ``"_name"`` the same way;
* patching through another module's imported module (``monkeypatch.setattr(cli.os, ...)``).

Dunder names (``__name__``, ``__dict__``) are the language's, not a module's, and
stay allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REACHING_CALLS = frozenset({"getattr", "setattr", "hasattr", "delattr"})
PATCHING_METHODS = frozenset({"setattr", "setitem", "delattr", "delitem"})


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_here(tree: ast.AST) -> set[str]:
    """Names this file defines: functions, classes, assigned names and attributes, arguments."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name):
            if node.value.id in ("self", "cls"):
                names.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
    return names


def _imported_modules(tree: ast.AST) -> set[str]:
    """Local names bound to modules of this project (``from host_spec.host.cli import main as cli``)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            bound.update(alias.asname or alias.name for alias in node.names)
    return bound


def violations(source: str, filename: str = "<test>") -> list[str]:
    """Every reach into another module's private names in one test file, as ``line: text``."""
    tree = ast.parse(source, filename)
    own = _defined_here(tree)
    modules = _imported_modules(tree)
    found: list[str] = []

    def flag(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            flag(node, f"{ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                if _private(alias.name):
                    flag(node, f"from {node.module} import {alias.name}")
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            reaching = (isinstance(func, ast.Name) and name in REACHING_CALLS) or (
                isinstance(func, ast.Attribute) and name in PATCHING_METHODS
            )
            if not reaching:
                continue
            if len(node.args) > 1:
                key = node.args[1]
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and _private(key.value):
                    if key.value.split(".")[-1] not in own:
                        flag(node, ast.unparse(node))
            target = node.args[0]
            if (
                isinstance(func, ast.Attribute)
                and isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id in modules
                and target.attr not in own
                and target.attr in ("os", "sys", "time", "asyncio", "subprocess", "shutil", "socket")
            ):
                flag(node, f"patches {ast.unparse(target)} through another module")
    return found


def test_no_test_reaches_into_another_modules_private_names() -> None:
    found = [
        line
        for path in sorted(TESTS.rglob("*.py"))
        for line in violations(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS.parent)))
    ]
    assert found == [], "use a public seam instead:\n" + "\n".join(found)


class TestTheScanItself:
    """The guard must catch what it promises (and let a file's own helpers be)."""

    def test_private_attributes_of_other_objects_are_flagged(self) -> None:
        source = "def test(session):\n    session._commit._backend = None\n    assert host._soon_tasks\n"
        assert sorted(line.split(": ", 1)[1] for line in violations(source)) == [
            "host._soon_tasks",
            "session._commit",
            "session._commit._backend",
        ]

    def test_private_imports_and_string_reaches_are_flagged(self) -> None:
        source = (
            "from host_spec.host.store.commit import _Batch\n"
            "import host_spec.host.cli.main as cli\n"
            "def test(monkeypatch, obj):\n"
            "    getattr(obj, '_forming')\n"
            "    monkeypatch.setitem(cli._HANDLERS, 'log', None)\n"
            "    monkeypatch.setattr(cli.os, 'access', None)\n"
        )
        found = [line.split(": ", 1)[1] for line in violations(source)]
        assert found[0] == "from host_spec.host.store.commit import _Batch"
        assert "getattr(obj, '_forming')" in found and "cli._HANDLERS" in found
        assert "patches cli.os through another module" in found

    def test_a_files_own_private_helpers_and_dunders_are_allowed(self) -> None:
        source = (
            "class Kit:\n"
            "    def __init__(self):\n"
            "        self._gate = 1\n"
            "    def _block(self):\n"
            "        return self._gate\n"
            "def test(kit):\n"
            "    kit._block()\n"
            "    assert Kit.__name__ and kit.__dict__\n"
            "import types as _types\n"
        )
        assert violations(source) == []
