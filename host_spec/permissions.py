"""Permission rules and durable asks: the contract between the host's gate and whoever answers.

The host checks every tool call against the profile's ``[permissions]`` rules
before it runs (after its arguments decoded, before any veto or body). The rule
language and its one pure evaluation live here, so a host, a test oracle and the
docs agree on what a rule means:

* ``TOOL`` names a tool (``spawn_teammate``); ``*`` and ``?`` glob over tool names
  (``mcp__github__*``).
* ``bash(PATTERN)`` matches the shell command: ``*`` matches any run of characters,
  a trailing `` *`` (or Claude Code's ``:*``) also matches the bare command
  (``bash(pytest *)`` matches ``pytest`` and ``pytest -q``). Whitespace runs count
  as one space.
* ``TOOL(GLOB)`` for a tool with a ``path`` argument (``write_file(src/**)``): the
  path, resolved against the member's workspace, matched relative to it (``*``
  within one path segment, ``**`` across segments). A path outside the workspace
  never matches a relative glob; an absolute glob matches the absolute path.
  Another tool's argument pattern never matches.

**Compound shell commands.** A command is cut into parts at every ``;``, ``&``,
``|``, newline, ``(``, ``)``, ``<``, ``>``, backtick and ``$(`` (quotes are not
honoured: cutting too often only makes a command harder to allow). Each part is
decided on its own and the command gets the strictest part's decision (deny over
ask over allow over the default), so ``pytest && curl evil`` is allowed only when
``curl evil`` is too, and ``echo $(rm -rf ~)`` meets the rules for ``rm``. A part
that starts with variable assignments (``LD_PRELOAD=x pytest``) never matches an
allow rule (unless the rule spells the assignment), while deny and ask rules are
matched with and without them.

Decisions: **deny** wins over **ask** over **allow**; a call no rule names follows
``default``. A denied call is the tool result ``PERMISSION_DENIED`` naming the rule;
an asked one waits for a :class:`PermissionAnswer` from the host's
:class:`PermissionRouter` (the Team plugin provides one): the request is recorded
before anything runs, a restart never answers it, and its deadline denies it.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, runtime_checkable

import attrs
import msgspec

from host_spec.errors import ConfigError, DshError

if TYPE_CHECKING:
    from host_spec.protocols import Agent

__all__ = [
    "Decision",
    "Verdict",
    "PermissionRule",
    "RuleSet",
    "PermissionSettings",
    "PermissionRequest",
    "PermissionAnswer",
    "PermissionRouter",
    "PermissionDeniedError",
    "PermissionMark",
    "TOOL_PERMISSION",
    "DEFAULT_RULE",
    "parse_rule",
    "evaluate",
    "command_parts",
    "exact_rule",
    "settings_from",
]

Decision = Literal["allow", "ask", "deny"]
#: What a :class:`Verdict` names when no rule matched: the profile's default decided.
DEFAULT_RULE: Final = "default"
#: The host's own-log record of a call's ask (see :class:`PermissionMark`).
TOOL_PERMISSION: Final = "tool/permission"
_STRICTNESS: Final[dict[str, int]] = {"allow": 0, "ask": 1, "deny": 2}
_RULE: Final = re.compile(r"^([A-Za-z0-9_.*?\-\[\]]+)(?:\((.*)\))?$", re.DOTALL)
_SEPARATORS: Final = re.compile(r"\$\(|[;&|\n\r()<>`]")
_ASSIGNMENT: Final = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+")
_SPACES: Final = re.compile(r"\s+")


class PermissionDeniedError(DshError):
    """A tool call the permission rules (or an answer) refused; nothing ran."""

    code = "PERMISSION_DENIED"


@attrs.frozen
class PermissionRule:
    """One parsed rule: a glob over tool names and an optional argument pattern.

    Attributes:
        text: The rule as written (what a verdict names).
        tool: The tool-name glob.
        argument: The argument pattern, or ``None`` for the tool name alone.
    """

    text: str
    tool: str
    argument: str | None = None

    def names(self, tool: str) -> bool:
        """Whether the rule's tool glob covers ``tool``."""
        return fnmatch.fnmatchcase(tool, self.tool)


def parse_rule(text: str, where: str = "permissions") -> PermissionRule:
    """Parse ``TOOL`` or ``TOOL(PATTERN)``.

    Raises:
        ConfigError: an empty or malformed rule (the message names ``where``).
    """
    found = _RULE.match(text.strip()) if isinstance(text, str) else None
    if found is None or (found.group(2) is not None and not found.group(2).strip()):
        raise ConfigError(f"invalid permission rule {text!r}: write TOOL or TOOL(PATTERN) @ {where}", path=where)
    argument = found.group(2)
    return PermissionRule(text=text.strip(), tool=found.group(1), argument=None if argument is None else argument.strip())


def _command_regex(pattern: str) -> re.Pattern[str]:
    """A bash pattern as a full-match regex (``*`` any run; trailing `` *``/``:*`` also the bare command)."""
    pattern = _SPACES.sub(" ", pattern.strip())
    bare = False
    if pattern.endswith(":*"):
        pattern, bare = pattern[:-2].rstrip(), True
    elif pattern.endswith(" *"):
        pattern, bare = pattern[:-2].rstrip(), True
    body = ".*".join(re.escape(piece) for piece in pattern.split("*"))
    return re.compile(f"{body}(?: .*)?" if bare else body, re.DOTALL)


def _path_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a full-match regex: ``**`` any run (``/`` included), ``*``/``?`` within a segment."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
        index += 1
    return re.compile("".join(out), re.DOTALL)


def command_parts(command: str) -> list[str]:
    """The simple commands of ``command``, whitespace-normalised (see the module docstring)."""
    parts = (_SPACES.sub(" ", part).strip() for part in _SEPARATORS.split(command))
    return [part for part in parts if part]


def _workspace_path(raw: str, workspace: str | None) -> tuple[str, str | None]:
    """``(absolute, relative-or-None)`` of a tool's ``path`` argument (``None``: outside the workspace)."""
    root = posixpath.normpath(workspace) if workspace else None
    joined = raw if posixpath.isabs(raw) or root is None else posixpath.join(root, raw)
    absolute = posixpath.normpath(joined)
    if root is None:
        return absolute, None if posixpath.isabs(raw) else posixpath.normpath(raw)
    relative = posixpath.relpath(absolute, root)
    return absolute, None if relative == ".." or relative.startswith("../") else relative


@attrs.frozen
class Verdict:
    """What the rules decide for one call: the decision and the rule that made it (``default``: none did)."""

    decision: Decision
    rule: str = DEFAULT_RULE


@attrs.frozen
class _Compiled:
    rule: PermissionRule
    regex: re.Pattern[str] | None


def _compile(rule: PermissionRule) -> _Compiled:
    if rule.argument is None:
        return _Compiled(rule, None)
    if rule.tool == "bash":
        return _Compiled(rule, _command_regex(rule.argument))
    return _Compiled(rule, _path_regex(rule.argument))


@attrs.frozen
class RuleSet:
    """The compiled ``allow``/``ask``/``deny`` lists and the default, built once per profile."""

    default: Literal["allow", "ask"] = "allow"
    allow: tuple[_Compiled, ...] = ()
    ask: tuple[_Compiled, ...] = ()
    deny: tuple[_Compiled, ...] = ()

    @classmethod
    def build(
        cls, *, default: Literal["allow", "ask"] = "allow", allow: Iterable[str] = (), ask: Iterable[str] = (),
        deny: Iterable[str] = (),
    ) -> RuleSet:
        """Parse and compile every rule.

        Raises:
            ConfigError: a malformed rule (the field path names its list and index).
        """

        def compiled(name: str, texts: Iterable[str]) -> tuple[_Compiled, ...]:
            return tuple(_compile(parse_rule(text, f"permissions.{name}[{i}]")) for i, text in enumerate(texts))

        return cls(default, compiled("allow", allow), compiled("ask", ask), compiled("deny", deny))

    def with_allowed(self, texts: Iterable[str]) -> RuleSet:
        """These rules plus extra ``allow`` rules (a session's "allow always" answers)."""
        extra = tuple(_compile(parse_rule(text)) for text in texts)
        return attrs.evolve(self, allow=(*self.allow, *extra)) if extra else self


def _first(rules: Sequence[_Compiled], tool: str, subjects: Sequence[str] | None) -> str | None:
    """The first rule of ``rules`` naming ``tool`` whose pattern matches one of ``subjects``."""
    for compiled in rules:
        if not compiled.rule.names(tool):
            continue
        if compiled.regex is None:
            return compiled.rule.text
        if subjects is not None and any(compiled.regex.fullmatch(subject) for subject in subjects):
            return compiled.rule.text
    return None


def _decide(rules: RuleSet, tool: str, strict: Sequence[str] | None, loose: Sequence[str] | None) -> Verdict:
    """Deny over ask over allow over default for one subject (``strict`` for allow, ``loose`` for the rest)."""
    rule = _first(rules.deny, tool, loose)
    if rule is not None:
        return Verdict("deny", rule)
    rule = _first(rules.ask, tool, loose)
    if rule is not None:
        return Verdict("ask", rule)
    rule = _first(rules.allow, tool, strict)
    if rule is not None:
        return Verdict("allow", rule)
    return Verdict(rules.default)


def evaluate(rules: RuleSet, tool: str, arguments: Mapping[str, Any], workspace: str | None = None) -> Verdict:
    """The decision for calling ``tool`` with ``arguments`` in ``workspace`` (pure; see the module docstring)."""
    if tool == "bash" and isinstance(arguments.get("command"), str):
        parts = command_parts(arguments["command"]) or [""]
        verdicts = []
        for part in parts:
            stripped = _ASSIGNMENT.sub("", part)
            verdicts.append(_decide(rules, tool, [part], [part, stripped]))
        return max(verdicts, key=lambda verdict: _STRICTNESS[verdict.decision])
    path = arguments.get("path")
    if isinstance(path, str):
        absolute, relative = _workspace_path(path, workspace)
        subjects = [absolute] if relative is None else [relative, absolute]
        return _decide(rules, tool, subjects, subjects)
    return _decide(rules, tool, None, None)


def exact_rule(tool: str, arguments: Mapping[str, Any]) -> str:
    """The rule an "allow always" answer adds: this exact command or path (``""``: none can be written).

    A compound command, or a command or path holding a pattern character, gets none:
    its "always" answer allows this call only, never something wider.
    """
    if tool == "bash":
        command = arguments.get("command")
        if not isinstance(command, str):
            return ""
        command = _SPACES.sub(" ", command).strip()
        if not command or "*" in command or ")" in command or _SEPARATORS.search(command):
            return ""
        return f"bash({command})"
    path = arguments.get("path")
    if isinstance(path, str):
        if not path or any(char in path for char in "*?()"):
            return ""
        return f"{tool}({path})"
    return tool


@attrs.frozen
class PermissionSettings:
    """The profile's ``[permissions]`` table.

    Attributes:
        default: What a call no rule names gets (``allow`` keeps the behaviour of
            profiles written before rules existed; a careful user sets ``ask``).
        allow, ask, deny: Rules (see the module docstring).
        delegate: Who answers a teammate's ask: ``user`` (default), or ``lead``
            (the Team's Lead gets a framed request; the user may still answer first).
        ask_timeout_ms: How long an ask waits; at the deadline it is denied.
    """

    default: Literal["allow", "ask"] = "allow"
    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    delegate: Literal["user", "lead"] = "user"
    ask_timeout_ms: int = attrs.field(default=600_000, validator=attrs.validators.and_(
        attrs.validators.ge(1), attrs.validators.le(7 * 24 * 3_600_000)))

    def rules(self) -> RuleSet:
        """The compiled rules.

        Raises:
            ConfigError: a malformed rule.
        """
        return RuleSet.build(default=self.default, allow=self.allow, ask=self.ask, deny=self.deny)

    @property
    def active(self) -> bool:
        """Whether any call can be refused or asked (the default allow with no rules is today's behaviour)."""
        return self.default != "allow" or bool(self.ask or self.deny)


class PermissionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """An ask the host's gate hands to the router.

    Attributes:
        key: Stable per call across restarts (``member id/turn/step/call id``): the
            router records one request per key, so asking again after a crash
            finds the recorded one.
        tool: The tool name. arguments: The call's arguments (raw JSON text).
        rule: The rule that asked (``default`` when none named the call).
        timeout_ms: The profile's ``ask_timeout_ms``; the router fixes the deadline
            when it first records the request.
        delegate: The profile's ``delegate`` (``user`` or ``lead``).
        always_rule: The rule an "allow always" answer adds for this session.
    """

    key: str
    call_id: str
    tool: str
    arguments: str
    rule: str
    timeout_ms: int
    delegate: str = "user"
    always_rule: str = ""


class PermissionAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """How an ask was answered: ``allow`` or ``deny``, by whom (``user``, ``lead``, ``deadline``), why."""

    ask_id: str
    decision: Literal["allow", "deny"]
    by: str
    reason: str = ""
    always: bool = False


class PermissionMark(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Payload of ``tool/permission`` in the calling agent's own log.

    ``asked`` is durable before the router is asked, ``allowed`` before the body
    runs. Crash repair reads them: a call asked and never allowed never ran, so a
    resume waits for its answer again instead of closing it; an allowed call
    without a result may have run (``TOOL_OUTCOME_UNKNOWN``), never twice.
    """

    call_id: str
    phase: Literal["asked", "allowed"]
    rule: str = ""
    ask_id: str = ""
    by: str = ""


@runtime_checkable
class PermissionRouter(Protocol):
    """Who records and answers asks (looked up with ``host.service(PermissionRouter)``).

    The Team plugin provides one for every member of a Team; an ACP editor or any
    other answerer answers the same records through its public answer call.
    """

    def routes(self, agent: Agent) -> bool:
        """Whether this router can record ``agent``'s asks (else the host denies them)."""
        ...

    async def ask(self, agent: Agent, request: PermissionRequest) -> PermissionAnswer:
        """Record ``request`` (once per key, durably) and wait for its answer (or its deadline)."""
        ...


def settings_from(raw: Any) -> PermissionSettings:
    """Structure a ``[permissions]`` table and compile its rules once (errors name the field).

    Raises:
        ConfigError: an unknown key, a wrong type, a malformed rule.
    """
    from host_spec.config import structure_config

    if isinstance(raw, Mapping):
        for name in ("allow", "ask", "deny"):
            if name in raw and not isinstance(raw[name], (list, tuple)):
                raise ConfigError(f"expected a list of rules @ permissions.{name}", path=f"permissions.{name}")
    settings = structure_config(PermissionSettings, raw, "permissions")
    settings.rules()
    return settings

