"""``.gitignore`` rules, enough to keep search tools out of build output and dependencies.

Supported: blank lines and ``#`` comments, ``!`` negation (the last matching rule
wins), a trailing ``/`` for directories only, a ``/`` anywhere else anchoring the
pattern to its ``.gitignore``'s directory, ``*``, ``?``, ``[...]`` and ``**``. A
directory that is ignored is not entered (git cannot re-include files below an
excluded directory either). ``.git`` itself is always skipped. Nested
``.gitignore`` files apply below their own directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import attrs

__all__ = ["Rule", "Rules", "translate", "children", "walk"]

ALWAYS_SKIPPED: Final = frozenset({".git"})


def translate(pattern: str) -> str:
    """A regex source for a ``/``-separated glob: ``*``/``?`` stay in one segment, ``**`` spans segments."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[" and (end := _class_end(pattern, i)) > 0:
            body = pattern[i + 1 : end]
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at ``start``, or -1 (then ``[`` is literal)."""
    j = start + 1
    if pattern[j : j + 1] in ("!", "^"):
        j += 1
    if pattern[j : j + 1] == "]":
        j += 1
    return pattern.find("]", j)


@attrs.frozen
class Rule:
    """One parsed ``.gitignore`` line, relative to the directory ``base`` (``""``: the root)."""

    base: str
    regex: re.Pattern[str]
    negated: bool
    directory_only: bool

    @classmethod
    def parse(cls, base: str, line: str) -> Rule | None:
        line = line.rstrip("\n").rstrip("\r")
        if not line.strip() or line.startswith("#"):
            return None
        line = line.rstrip(" ")
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        if line.startswith("\\"):
            line = line[1:]
        directory_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            return None
        anchored = "/" in line
        line = line.lstrip("/")
        source = translate(line) if anchored else "(?:.*/)?" + translate(line)
        return cls(base, re.compile(source + r"\Z"), negated, directory_only)

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.directory_only and not is_dir:
            return False
        if self.base:
            if not rel.startswith(self.base + "/"):
                return False
            rel = rel[len(self.base) + 1 :]
        return self.regex.match(rel) is not None


@attrs.frozen
class Rules:
    """The rules in effect in one directory (its ancestors' first, then its own)."""

    rules: tuple[Rule, ...] = ()

    def below(self, root: Path, rel_dir: str) -> Rules:
        """These rules plus ``rel_dir``'s own ``.gitignore`` (if readable)."""
        path = root / rel_dir / ".gitignore" if rel_dir else root / ".gitignore"
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return self
        parsed = [rule for rule in (Rule.parse(rel_dir, line) for line in lines) if rule is not None]
        return Rules((*self.rules, *parsed)) if parsed else self

    def ignored(self, rel: str, is_dir: bool) -> bool:
        verdict = False
        for rule in self.rules:
            if rule.matches(rel, is_dir):
                verdict = not rule.negated
        return verdict

    @classmethod
    def for_directory(cls, root: Path, rel_dir: str) -> Rules:
        """The rules in effect inside ``rel_dir`` (``""`` for the root)."""
        rules = cls().below(root, "")
        parts = [part for part in rel_dir.split("/") if part and part != "."]
        for depth in range(1, len(parts) + 1):
            rules = rules.below(root, "/".join(parts[:depth]))
        return rules


def children(root: Path, rel_dir: str, rules: Rules) -> list[tuple[str, bool]]:
    """``(relative path, is_dir)`` of the direct entries of ``rel_dir`` that ``rules`` keep, by name."""
    try:
        entries = sorted((root / rel_dir).iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    kept = []
    for entry in entries:
        if entry.name in ALWAYS_SKIPPED:
            continue
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        is_dir = entry.is_dir() and not entry.is_symlink()
        if not rules.ignored(rel, is_dir):
            kept.append((rel, is_dir))
    return kept


def walk(root: Path, rel_dir: str = "") -> Iterator[tuple[str, bool]]:
    """``(relative path, is_dir)`` of every entry below ``rel_dir`` that is not ignored.

    Symlinked directories are listed but not entered (no loops, no escape).
    """
    stack = [(rel_dir, Rules.for_directory(root, rel_dir))]
    while stack:
        current, rules = stack.pop()
        subdirs: list[tuple[str, Rules]] = []
        for rel, is_dir in children(root, current, rules):
            yield rel, is_dir
            if is_dir:
                subdirs.append((rel, rules.below(root, rel)))
        stack.extend(reversed(subdirs))
