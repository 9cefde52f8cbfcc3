"""The import graph and the names of the four packages: the floors hold, and one name has one meaning.

The imports are read from the source (``ast``), including those under
``if TYPE_CHECKING:`` and inside functions, because a type-only cycle is still a
cycle a reader must untangle and a lazy import is still a dependency. An edge goes
from a module to the module it names: ``from a.b import c`` is an edge to ``a.b.c``
when that is a module, else to ``a.b``. The implicit import of a parent package
(``a`` when ``a.b`` is imported) is not an edge, so a package ``__init__`` may
re-export its submodules as long as they never import it back.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("host_spec", "dsh_team", "dsh_team_tools", "dsh_team_invariant")
PLUGINS = ("dsh_team", "dsh_team_tools", "dsh_team_invariant")
#: The public surface of ``dsh_team``: the package itself and its room packages.
TEAM_API = frozenset({"dsh_team", "dsh_team.core", "dsh_team.log", "dsh_team.roster", "dsh_team.mail", "dsh_team.views"})


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the four packages by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _imported(name: str, path: Path) -> Iterator[str]:
    """Dotted names ``path`` imports (absolute, resolved from relative imports)."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop] if drop else base
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            for alias in node.names:
                yield f"{stem}.{alias.name}"


@cache
def graph() -> dict[str, frozenset[str]]:
    """Module -> the project modules it imports."""
    known = modules()
    edges: dict[str, frozenset[str]] = {}
    for name, path in known.items():
        targets: set[str] = set()
        for imported in _imported(name, path):
            target = imported if imported in known else imported.rpartition(".")[0]
            if target in known and target != name:
                targets.add(target)
            elif imported in known or target in known:
                pass
        edges[name] = frozenset(targets)
    return edges


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle() -> None:
    """No two modules import each other, directly or through others (type-only imports count)."""
    assert cycles(graph()) == []


#: Packages whose rooms (a sub-package, or a module directly in the package) form floors.
HOUSES = ("host_spec", "host_spec.host", "dsh_team", "dsh_team_tools", "dsh_team_invariant")


def room_of(module: str, house: str) -> str | None:
    """The room of ``house`` that holds ``module``: its first name below the house (``None``: outside it).

    A folder is one room with everything in it; a module directly in the house is
    a room of its own (``dsh_team.errors`` sits low, ``dsh_team.service`` high), and
    the house's ``__init__`` belongs to no room (it may re-export any of them).
    """
    if not module.startswith(house + "."):
        return None
    return f"{house}.{module[len(house) + 1:].split('.', 1)[0]}"


def room_graph(edges: dict[str, frozenset[str]], house: str) -> dict[str, frozenset[str]]:
    """Room -> the other rooms of ``house`` its modules import."""
    rooms: dict[str, set[str]] = {}
    for module, targets in edges.items():
        room = room_of(module, house)
        if room is None:
            continue
        found = rooms.setdefault(room, set())
        for target in targets:
            other = room_of(target, house)
            if other is not None and other != room:
                found.add(other)
    return {room: frozenset(targets) for room, targets in rooms.items()}


@pytest.mark.parametrize("house", HOUSES)
def test_rooms_stand_on_floors(house: str) -> None:
    """No two rooms of a house import each other, directly or through others: the imports run one way
    between folders, not only between files (a cycle of folders is a layer that runs back up)."""
    edges = graph()
    rooms = room_graph(edges, house)
    back = {" <-> ".join(group): sorted(f"{m} -> {t}" for m in edges for t in edges[m]
                                        if room_of(m, house) in group and room_of(t, house) in group
                                        and room_of(t, house) != room_of(m, house))
            for group in map(tuple, cycles(rooms))}
    assert back == {}


@pytest.mark.parametrize("package", PLUGINS)
def test_plugins_import_the_contract_not_the_reference_host(package: str) -> None:
    """Plugin packages depend on ``host_spec``'s contract modules, never on ``host_spec.host``."""
    offending = sorted(
        f"{name} -> {target}"
        for name, targets in graph().items()
        if name == package or name.startswith(package + ".")
        for target in targets
        if target == "host_spec.host" or target.startswith("host_spec.host.")
    )
    assert offending == []


def test_the_contract_does_not_import_the_reference_host() -> None:
    """``host_spec``'s contract modules stand alone: the reference host sits on them, not under."""
    offending = sorted(
        f"{name} -> {target}"
        for name, targets in graph().items()
        if name.startswith("host_spec") and not name.startswith("host_spec.host")
        for target in targets
        if target.startswith("host_spec.host")
    )
    assert offending == []


def _edges_from(package: str) -> list[tuple[str, str]]:
    return [
        (name, target)
        for name, targets in graph().items()
        if name == package or name.startswith(package + ".")
        for target in sorted(targets)
    ]


@pytest.mark.parametrize("package", ("dsh_team_tools", "dsh_team_invariant"))
def test_other_plugins_use_the_team_public_api(package: str) -> None:
    """Tools and invariant import ``dsh_team`` or a room package, never a room's inner module."""
    offending = [
        f"{name} -> {target}"
        for name, target in _edges_from(package)
        if target.startswith("dsh_team.") or target == "dsh_team"
        if target not in TEAM_API and target != "dsh_team.plugin"
    ]
    assert offending == []


def test_team_modules_import_concrete_modules_not_the_public_packages() -> None:
    """Inside ``dsh_team`` a module names the module it needs, never a re-exporting package.

    The packages re-export their rooms; a module importing one back would be a cycle
    (and would import half-initialised names). Only a package may import its own
    submodules, and the top package its rooms.
    """
    offending = []
    for name, target in _edges_from("dsh_team"):
        if target not in TEAM_API:
            continue
        is_package = modules()[name].name == "__init__.py"
        if is_package and (name == "dsh_team" or target.startswith(name + ".")):
            continue
        offending.append(f"{name} -> {target}")
    assert offending == []


def _type_names() -> dict[str, list[str]]:
    """Public classes and type aliases at module level, by name -> defining modules."""
    found: dict[str, list[str]] = {}
    for name, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in tree.body:
            defined: list[str] = []
            if isinstance(node, ast.ClassDef):
                defined.append(node.name)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                alias = node.targets[0].id
                # A CamelCase assignment is a type alias (``Role = Literal[...]``).
                if alias[:1].isupper() and not alias.isupper() and "_" not in alias:
                    defined.append(alias)
            for type_name in defined:
                if not type_name.startswith("_"):
                    found.setdefault(type_name, []).append(name)
    return found


def test_no_type_name_is_defined_twice() -> None:
    """One name, one meaning: a public type name is defined in exactly one module.

    The one exception is the reference host's implementation of a contract
    Protocol, which carries the Protocol's name because it *is* that thing.
    """
    protocol_modules = ("host_spec.protocols", "host_spec.live")
    contract = {
        node.name
        for module in protocol_modules
        for node in ast.parse(modules()[module].read_text()).body
        if isinstance(node, ast.ClassDef)
    }
    clashes = {}
    for type_name, where in sorted(_type_names().items()):
        if len(where) < 2:
            continue
        if type_name in contract and all(m in protocol_modules or m.startswith("host_spec.host.") for m in where):
            continue
        clashes[type_name] = where
    assert clashes == {}


class TestCycleFinder:
    """The finder itself finds what it must (else a green run would prove nothing)."""

    def test_finds_a_direct_and_an_indirect_cycle(self) -> None:
        edges = {
            "a": frozenset({"b"}),
            "b": frozenset({"a"}),
            "c": frozenset({"d"}),
            "d": frozenset({"e"}),
            "e": frozenset({"c"}),
            "f": frozenset({"a"}),
        }
        assert sorted(cycles(edges)) == [["a", "b"], ["c", "d", "e"]]

    def test_rooms_join_their_modules_and_keep_only_edges_between_rooms(self) -> None:
        edges = {
            "p.a.x": frozenset({"p.a.y", "p.b.z"}),  # inside room a, then a -> b
            "p.a.y": frozenset(),
            "p.b.z": frozenset({"p.errors", "q.w"}),  # b -> the module room errors; q is another house
            "p.errors": frozenset(),
            "p": frozenset({"p.a.x"}),  # the house's __init__ is no room
        }
        assert room_graph(edges, "p") == {"p.a": frozenset({"p.b"}), "p.b": frozenset({"p.errors"}),
                                          "p.errors": frozenset()}
        assert cycles(room_graph({**edges, "p.errors": frozenset({"p.a.y"})}, "p")) == [["p.a", "p.b", "p.errors"]]

    def test_a_dag_has_none(self) -> None:
        assert cycles({"a": frozenset({"b", "c"}), "b": frozenset({"c"}), "c": frozenset()}) == []

    def test_type_checking_and_function_level_imports_are_edges(self) -> None:
        edges = graph()
        # Known imports of each kind: a TYPE_CHECKING one and a module-level one.
        assert "host_spec.protocols" in edges["dsh_team.log.lead_fold"]
        assert "dsh_team.core.fold" in edges["dsh_team.log.lead_fold"]
