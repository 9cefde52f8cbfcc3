"""The rule language: parsing, the profile table, and ``evaluate`` against a naive oracle.

The oracle decides the same questions the slow, obvious way: it splits a command
character by character at the separators, matches rules by brute-force
backtracking globs written here (no regex), and takes the strictest part. The
property test draws rules and calls from small alphabets so that matches,
near-misses, compound commands and paths outside the workspace all occur often.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host_spec.errors import ConfigError
from host_spec.host.plugins.profiles import load_profile
from host_spec.permissions import (
    DEFAULT_RULE,
    PermissionSettings,
    RuleSet,
    Verdict,
    command_parts,
    evaluate,
    exact_rule,
    parse_rule,
    settings_from,
)

# ---------------------------------------------------------------- the oracle

_SEPARATORS = set(";&|\n\r()<>`")


def oracle_parts(command: str) -> list[str]:
    parts, current, index = [], "", 0
    while index < len(command):
        if command.startswith("$(", index):
            parts.append(current)
            current, index = "", index + 2
            continue
        char = command[index]
        if char in _SEPARATORS:
            parts.append(current)
            current = ""
        else:
            current += char
        index += 1
    parts.append(current)
    cleaned = [" ".join(part.split()) for part in parts]
    return [part for part in cleaned if part]


def glob(pattern: str, text: str, *, star_crosses: bool, double: bool) -> bool:
    """Backtracking glob: ``*`` any run (within a segment unless ``star_crosses``), ``**`` any run, ``?`` one char."""
    if not pattern:
        return not text
    if double and pattern.startswith("**/"):
        return glob(pattern[3:], text, star_crosses=star_crosses, double=double) or any(
            text[i] == "/" and glob(pattern[3:], text[i + 1:], star_crosses=star_crosses, double=double)
            for i in range(len(text)))
    if double and pattern.startswith("**"):
        return any(glob(pattern[2:], text[i:], star_crosses=star_crosses, double=double) for i in range(len(text) + 1))
    head = pattern[0]
    if head == "*":
        for i in range(len(text) + 1):
            if not star_crosses and "/" in text[:i]:
                break
            if glob(pattern[1:], text[i:], star_crosses=star_crosses, double=double):
                return True
        return False
    if not text:
        return False
    if head == "?" and double:
        return text[0] != "/" and glob(pattern[1:], text[1:], star_crosses=star_crosses, double=double)
    return head == text[0] and glob(pattern[1:], text[1:], star_crosses=star_crosses, double=double)


def command_matches(pattern: str, part: str) -> bool:
    pattern = " ".join(pattern.split())
    for suffix in (":*", " *"):
        if pattern.endswith(suffix):
            stem = pattern[: -len(suffix)].rstrip()
            return glob(stem, part, star_crosses=True, double=False) or any(
                part[i] == " " and glob(stem, part[:i], star_crosses=True, double=False) for i in range(len(part)))
    return glob(pattern, part, star_crosses=True, double=False)


def tool_matches(pattern: str, tool: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(tool, pattern)


def strip_assignments(part: str) -> str:
    words = part.split(" ")
    while len(words) > 1 and "=" in words[0] and words[0].split("=")[0].isidentifier():
        words = words[1:]
    return " ".join(words)


def oracle(rules: dict[str, list[str]], default: str, tool: str, arguments: dict[str, Any], root: str) -> str:
    def split(rule: str) -> tuple[str, str | None]:
        return (rule[: rule.index("(")], rule[rule.index("(") + 1: -1].strip()) if "(" in rule else (rule, None)

    def hit(kind: str, subjects: list[str] | None, matcher: Any) -> bool:
        for rule in rules[kind]:
            name, argument = split(rule)
            if tool_matches(name, tool) and (argument is None or (subjects is not None and any(
                    matcher(argument, s) for s in subjects))):
                return True
        return False

    def one(strict: list[str] | None, loose: list[str] | None, matcher: Any) -> str:
        if hit("deny", loose, matcher):
            return "deny"
        if hit("ask", loose, matcher):
            return "ask"
        return "allow" if hit("allow", strict, matcher) else default

    order = ["allow", "ask", "deny"]
    if tool == "bash":
        decisions = [one([p], [p, strip_assignments(p)], command_matches)
                     for p in oracle_parts(arguments["command"]) or [""]]
        return max(decisions, key=order.index)
    if "path" in arguments:
        import posixpath

        absolute = posixpath.normpath(posixpath.join(root, arguments["path"]))
        relative = posixpath.relpath(absolute, root)
        subjects = [absolute] if relative == ".." or relative.startswith("../") else [relative, absolute]
        return one(subjects, subjects, lambda p, s: glob(p, s, star_crosses=False, double=True))
    return one(None, None, None)


# ---------------------------------------------------------------- the property

_WORDS = st.sampled_from(["pytest", "npm", "test", "rm", "-rf", "x", "X=1", "echo", "git", "push"])
_SEP = st.sampled_from([" ", " ", " ", "; ", " && ", " | ", "\n", " $(", ")", " > ", "`"])
_COMMAND = st.lists(st.tuples(_WORDS, _SEP), max_size=5).map(lambda pairs: "".join(w + s for w, s in pairs).strip())
_BASH_RULE = st.sampled_from(["bash", "bash(pytest *)", "bash(npm test:*)", "bash(rm *)", "bash(echo x)",
                              "bash(git push*)", "bash(X=1 rm *)", "bash(*)", "b*"])
_PATH = st.lists(st.sampled_from(["src", "a.py", "..", ".git", "docs", "b"]), min_size=1, max_size=4).map("/".join)
_FILE_RULE = st.sampled_from(["write_file", "write_file(src/**)", "write_file(**/*.py)", "write_file(*.py)",
                              "write_file(src/*)", "write_file(/w/docs/**)", "write_file(.git/**)", "*_file",
                              "read_file(**)", "write_file(src/?.py)"])
_OTHER_RULE = st.sampled_from(["spawn_teammate", "mcp__github__*", "mcp__*__list", "*"])


@settings(max_examples=600, deadline=None)
@given(
    default=st.sampled_from(["allow", "ask"]),
    allow=st.lists(st.one_of(_BASH_RULE, _FILE_RULE, _OTHER_RULE), max_size=4),
    ask=st.lists(st.one_of(_BASH_RULE, _FILE_RULE, _OTHER_RULE), max_size=2),
    deny=st.lists(st.one_of(_BASH_RULE, _FILE_RULE, _OTHER_RULE), max_size=2),
    call=st.one_of(
        _COMMAND.map(lambda c: ("bash", {"command": c})),
        _PATH.map(lambda p: ("write_file", {"path": p})),
        _PATH.map(lambda p: ("read_file", {"path": p})),
        st.sampled_from([("spawn_teammate", {}), ("mcp__github__list", {}), ("mcp__docs__list", {}), ("glob", {})]),
    ),
)
def test_evaluate_agrees_with_the_naive_oracle(default: str, allow: list[str], ask: list[str], deny: list[str],
                                               call: tuple[str, dict[str, Any]]) -> None:
    rules = RuleSet.build(default=default, allow=allow, ask=ask, deny=deny)  # type: ignore[arg-type]
    tool, arguments = call
    verdict = evaluate(rules, tool, arguments, "/w")
    assert verdict.decision == oracle({"allow": allow, "ask": ask, "deny": deny}, default, tool, arguments, "/w")
    if verdict.rule != DEFAULT_RULE:
        assert verdict.rule in {"allow": allow, "ask": ask, "deny": deny}[verdict.decision]


@settings(max_examples=300, deadline=None)
@given(command=_COMMAND)
def test_parts_agree_with_the_oracle(command: str) -> None:
    assert command_parts(command) == oracle_parts(command)


# ---------------------------------------------------------------- examples the docs promise

RULES = RuleSet.build(
    default="ask", allow=["bash(pytest *)", "bash(npm test:*)", "write_file(src/**)", "mcp__github__*", "read_file"],
    ask=["bash(git push*)"], deny=["bash(rm *)"],
)


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    ("bash", {"command": "pytest -q"}, Verdict("allow", "bash(pytest *)")),
    ("bash", {"command": "pytest"}, Verdict("allow", "bash(pytest *)")),
    ("bash", {"command": "pytestx"}, Verdict("ask")),
    ("bash", {"command": "pytest && curl x"}, Verdict("ask")),
    ("bash", {"command": "pytest; rm -rf ~"}, Verdict("deny", "bash(rm *)")),
    ("bash", {"command": "echo $(rm -rf ~)"}, Verdict("deny", "bash(rm *)")),
    ("bash", {"command": "pytest > ~/.bashrc"}, Verdict("ask")),
    ("bash", {"command": "LD_PRELOAD=x.so pytest"}, Verdict("ask")),
    ("bash", {"command": "X=1 rm -rf /"}, Verdict("deny", "bash(rm *)")),
    ("bash", {"command": "npm   test -- -w"}, Verdict("allow", "bash(npm test:*)")),
    ("bash", {"command": "git push origin"}, Verdict("ask", "bash(git push*)")),
    ("write_file", {"path": "src/a/b.py"}, Verdict("allow", "write_file(src/**)")),
    ("write_file", {"path": "src/../.git/config"}, Verdict("ask")),
    ("write_file", {"path": "/w/src/x"}, Verdict("allow", "write_file(src/**)")),
    ("write_file", {"path": "../w/src/x"}, Verdict("allow", "write_file(src/**)")),
    ("write_file", {"path": "/etc/passwd"}, Verdict("ask")),
    ("mcp__github__list_issues", {}, Verdict("allow", "mcp__github__*")),
    ("spawn_teammate", {}, Verdict("ask")),
    ("read_file", {"path": "x"}, Verdict("allow", "read_file")),
])  # fmt: skip
def test_documented_examples(tool: str, arguments: dict[str, Any], expected: Verdict) -> None:
    assert evaluate(RULES, tool, arguments, "/w") == expected


def test_without_a_workspace_a_relative_path_is_matched_as_written() -> None:
    rules = RuleSet.build(default="ask", allow=["write_file(src/**)", "write_file(/tmp/**)"])
    assert evaluate(rules, "write_file", {"path": "src/../src/a"}, None) == Verdict("allow", "write_file(src/**)")
    assert evaluate(rules, "write_file", {"path": "/tmp/x"}, None) == Verdict("allow", "write_file(/tmp/**)")


def test_an_argument_pattern_on_a_tool_without_that_argument_never_matches() -> None:
    rules = RuleSet.build(default="ask", allow=["glob(src/**)", "bash(ls)"])
    assert evaluate(rules, "glob", {"pattern": "src/*"}) == Verdict("ask")
    assert evaluate(rules, "bash", {}) == Verdict("ask")


def test_session_rules_widen_the_allow_list() -> None:
    rules = RuleSet.build(default="ask")
    assert rules.with_allowed([]) is rules
    assert evaluate(rules.with_allowed(["bash(make test)"]), "bash", {"command": "make  test"}).decision == "allow"


@pytest.mark.parametrize(("tool", "arguments", "rule"), [
    ("bash", {"command": "make   test"}, "bash(make test)"),
    ("bash", {"command": "make; rm x"}, ""),
    ("bash", {"command": "ls *.py"}, ""),
    ("bash", {"command": "  "}, ""),
    ("bash", {}, ""),
    ("write_file", {"path": "a.py"}, "write_file(a.py)"),
    ("write_file", {"path": "a*.py"}, ""),
    ("write_file", {"path": ""}, ""),
    ("spawn_teammate", {}, "spawn_teammate"),
])  # fmt: skip
def test_allow_always_adds_the_exact_call_only(tool: str, arguments: dict[str, Any], rule: str) -> None:
    assert exact_rule(tool, arguments) == rule
    if rule:
        assert evaluate(RuleSet.build(default="ask", allow=[rule]), tool, arguments).decision == "allow"


@pytest.mark.parametrize("text", ["", "bash()", "bash(  )", "ba sh", "(x)", 7])
def test_a_malformed_rule_names_its_place(text: Any) -> None:
    with pytest.raises(ConfigError) as bad:
        parse_rule(text, "permissions.allow[3]")
    assert bad.value.path == "permissions.allow[3]"


@pytest.mark.parametrize(("table", "path"), [
    ({"allow": "bash"}, "permissions.allow"),
    ({"deny": ["bash()"]}, "permissions.deny[0]"),
    ({"default": "deny"}, "permissions.default"),
    ({"ask_timeout_ms": 0}, "permissions"),  # the message names the key: 'ask_timeout_ms' must be >= 1
    ({"delegates": "lead"}, "permissions"),
])  # fmt: skip
def test_the_table_is_checked(table: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as bad:
        settings_from(table)
    assert bad.value.path == path


def test_default_settings_are_todays_behaviour() -> None:
    assert not PermissionSettings().active
    assert PermissionSettings(default="ask").active and PermissionSettings(deny=("bash",)).active


def test_profile_layers_override_key_by_key(tmp_path: Path) -> None:
    base = tmp_path / "base.toml"
    base.write_text('extends = "agent-teams"\n[permissions]\ndefault = "ask"\nallow = ["read_file"]\n')
    top = tmp_path / "top.toml"
    top.write_text('extends = "base.toml"\n[permissions]\nallow = ["bash(pytest *)"]\ndelegate = "lead"\n')
    settings_ = load_profile(top).permissions
    assert (settings_.default, settings_.allow, settings_.delegate) == ("ask", ("bash(pytest *)",), "lead")
    bad = tmp_path / "bad.toml"
    bad.write_text('extends = "agent-teams"\n[permissions]\nallow = ["bash("]\n')
    with pytest.raises(ConfigError) as error:
        load_profile(bad)
    assert error.value.path == "permissions.allow[0]" and "bad.toml" in error.value.message
    assert not load_profile("agent-teams").permissions.active


def test_no_table_is_the_defaults() -> None:
    assert settings_from(None) == PermissionSettings()
