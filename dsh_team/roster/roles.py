"""Roles: named teammate presets (description, instructions, tool allowlist, model) and who has one.

A role is found at spawn (``spawn_teammate(role=NAME)``) in the Lead's workspace
file ``.dsh/roles/NAME.toml`` first, else in the profile table
``[plugins.dsh-team.roles.NAME]``. Both hold the same keys::

    description = "Reviews diffs for correctness"   # the member's label when the spawn gives none
    instructions = "Never edit files; report findings to the Lead."   # appended to its first message
    tools = ["read_file", "grep"]                    # allowlist of non-Team tools (absent: all)
    model = "openai:gpt-4o-mini"                     # its model spec (absent: the host's choice)
    workspace_mode = "worktree"                      # its own git worktree (absent: the Team's mode)

Every check runs before anything is written, so a bad role never burns a
teammate name: an unknown role is ``TEAM_ROLE_NOT_FOUND``; a malformed file, an
unknown key or an allowlisted tool the Lead's host does not have is
``TEAM_ROLE_INVALID`` (the message names the file and the field or tool).

The choice is durable: a ``team/role`` record in the Lead log, appended in the
same serialized section as the member's ``provisioning`` record, so a member
cold-resumed later keeps its allowlist. The record is folded beside the Team
fold (:class:`RoleBook`, like the cost ledger): it never moves the wait position.
The Team's own tools are never taken away by an allowlist: a member must always
be able to talk to its Team.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from host_spec.errors import DshError

from dsh_team.core.snapshots import NonEmpty, SafeCount
from dsh_team.errors import TeamCode, TeamConfigError, TeamError
from dsh_team.log.member_records import MemberRecords, RecordKind

if TYPE_CHECKING:
    from host_spec.protocols import Continuations, Session

__all__ = [
    "TEAM_ROLE",
    "ROLE_VERSION",
    "RoleSpec",
    "RoleRecord",
    "find_role",
    "check_roles",
    "check_tools",
    "check_model",
    "with_instructions",
    "RoleBook",
    "ROLE_RECORDS",
]

TEAM_ROLE: Final = "team/role"
ROLE_VERSION: Final = 1
_NAME: Final = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_SPEC: Final = re.compile(r"^[A-Za-z0-9_.-]+:.+$")


class RoleSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """What a role gives a teammate (see the module docstring)."""

    description: str = ""
    instructions: str = ""
    tools: tuple[str, ...] | None = None
    model: str | None = None
    workspace_mode: str | None = None


class RoleRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Payload of ``team/role``: the role a member was spawned with, as it was then."""

    version: SafeCount
    team_id: NonEmpty
    member_id: NonEmpty
    role: NonEmpty
    spec: RoleSpec


#: The ``team/role`` record: its decoder and version, shared by the book and the invariant's vetting.
ROLE_RECORDS: Final = RecordKind(TEAM_ROLE, RoleRecord, ROLE_VERSION)


def _invalid(where: str, message: str) -> TeamError:
    return TeamError(f"role {where}: {message}", TeamCode.ROLE_INVALID)


def _spec(raw: Any, where: str) -> RoleSpec:
    try:
        spec = msgspec.convert(raw, RoleSpec)
    except msgspec.ValidationError as exc:
        raise _invalid(where, str(exc)) from None
    if spec.model is not None and not _SPEC.match(spec.model):
        raise _invalid(where, f"model must be a KIND:MODEL spec, got {spec.model!r} - at `$.model`")
    if spec.workspace_mode not in (None, "shared", "worktree"):
        raise _invalid(where, f'workspace_mode must be "shared" or "worktree", got {spec.workspace_mode!r}'
                              " - at `$.workspace_mode`")
    return spec


def find_role(name: Any, *, cwd: str | None, table: Mapping[str, Any], files: bool = True) -> RoleSpec:
    """The role ``name``: ``<cwd>/.dsh/roles/NAME.toml``, else the profile's ``roles`` table.

    ``files=False`` reads only the table (the profile check at load).

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` (not a role name), ``TEAM_ROLE_NOT_FOUND``,
            ``TEAM_ROLE_INVALID``.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise TeamError("role must be a lower-case name (letters, digits, - and _)", TeamCode.INVALID_ARGUMENT)
    path = Path(cwd or ".") / ".dsh" / "roles" / f"{name}.toml"
    try:
        text = path.read_text(encoding="utf-8") if files else None
    except FileNotFoundError:
        text = None
    except (OSError, UnicodeDecodeError) as exc:
        raise _invalid(str(path), f"unreadable ({exc})") from None
    if text is not None:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise _invalid(str(path), f"not TOML ({exc})") from None
        return _spec(raw, str(path))
    if name in table:
        return _spec(table[name], f"plugins.dsh-team.roles.{name}")
    raise TeamError(f'no role "{name}" (looked in {path} and the profile\'s roles)', TeamCode.ROLE_NOT_FOUND)


def role_names(*, cwd: str | None, table: Mapping[str, Any]) -> list[str]:
    """Every role name ``spawn_teammate`` could take now: ``<cwd>/.dsh/roles/*.toml`` and the profile's table.

    A file whose stem is not a role name is left out (``find_role`` would refuse it).
    Used as a hint (the closed set of ``role`` in a constrained step), never as a check.
    """
    folder = Path(cwd or ".") / ".dsh" / "roles"
    files = [path.stem for path in folder.glob("*.toml")] if folder.is_dir() else []
    return sorted({name for name in (*files, *table) if _NAME.match(name)})


def check_roles(table: Mapping[str, Any], continuations: Continuations | None = None) -> None:
    """Every role of the profile's ``roles`` table well formed (checked when the service is built).

    With ``continuations``, a role's model must be one the host can serve (:func:`check_model`).

    Raises:
        TeamConfigError: ``TEAM_INVALID_CONFIG`` with ``path`` ``roles.NAME``.
    """
    for name in table:
        try:
            spec = find_role(name, cwd=None, table=table, files=False)
            if continuations is not None:
                check_model(spec, continuations, f"plugins.dsh-team.roles.{name}")
        except TeamError as exc:
            raise TeamConfigError(exc.message, path=f"roles.{name}") from None


def check_model(spec: RoleSpec, continuations: Continuations, where: str) -> None:
    """Refuse a role whose model the host cannot serve, before a member exists (no name or slot is used).

    Raises:
        TeamError: ``TEAM_ROLE_INVALID`` quoting the host's model error (``MODEL_UNKNOWN`` ...).
    """
    if spec.model is None:
        return
    try:
        continuations.check_model(spec.model)
    except DshError as exc:
        raise _invalid(where, f"model {spec.model!r} cannot be used: {exc.code}: {exc.message} - at `$.model`") from None


def check_tools(spec: RoleSpec, known: Collection[str], where: str) -> None:
    """Refuse an allowlist that names a tool the host does not have (a typo would hide a tool silently).

    Raises:
        TeamError: ``TEAM_ROLE_INVALID`` naming the unknown tools.
    """
    unknown = sorted(set(spec.tools or ()) - set(known))
    if unknown:
        raise _invalid(where, f"unknown tools {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def with_instructions(prompt: list[Any], spec: RoleSpec) -> list[Any]:
    """The first message with the role's instructions appended as their own block."""
    if not spec.instructions.strip():
        return prompt
    return [*prompt, {"type": "text", "text": f"\n\nRole instructions:\n{spec.instructions}"}]


class RoleBook(MemberRecords[RoleRecord]):
    """The role of each member, per live Lead session, folded incrementally from its ``team/role`` records."""

    def __init__(self) -> None:
        super().__init__(ROLE_RECORDS)

    def roles(self, session: Session) -> Mapping[str, RoleRecord]:
        """Member id -> role record of ``session``'s Team, up to its last event (a resume folds afresh)."""
        return self.latest(session)
