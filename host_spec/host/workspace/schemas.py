"""Argument and result types of the workspace tools (the model reads the argument schemas).

Descriptions are short on purpose: every byte is paid on every model step.
Optional arguments are ``UNSET`` rather than ``None``, so the schema neither
shows a ``null`` branch nor invites the model to send one.
Results are compact: a digest the model can pass back as ``expected_sha256``, the
few numbers it needs, and ``warnings`` only when there are some.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "ReadArgs", "ReadResult", "WriteArgs", "EditArgs", "WriteResult",
    "GlobArgs", "ListArgs", "GrepArgs", "ListResult", "BashArgs", "BashResult",
]

Path = Annotated[str, msgspec.Meta(description="workspace-relative path")]
Sha = Annotated[str, msgspec.Meta(description="fail unless the current sha256 is this")] | UnsetType


class ReadArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    path: Path
    offset: Annotated[int, msgspec.Meta(ge=1, description="first line (1-based)")] = 1
    limit: Annotated[int, msgspec.Meta(ge=1, description="max lines")] | UnsetType = UNSET


class ReadResult(msgspec.Struct, frozen=True, omit_defaults=True):
    path: str
    sha256: str
    lines: int
    content: str
    note: str | None = None


class WriteArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    path: Path
    content: str
    expected_sha256: Sha = UNSET


class EditArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    path: Path
    old_string: Annotated[str, msgspec.Meta(description="exact text")]
    new_string: str
    expected_count: Annotated[int, msgspec.Meta(
        ge=1, description="replace all; must equal the occurrence count")] | UnsetType = UNSET
    expected_sha256: Sha = UNSET


class WriteResult(msgspec.Struct, frozen=True, omit_defaults=True):
    path: str
    sha256: str
    bytes: int
    created: bool = False
    replaced: int = 0
    warnings: tuple[str, ...] = ()


class GlobArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pattern: Annotated[str, msgspec.Meta(description="e.g. src/**/*.py (.gitignore applies)")]


class ListArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    path: Annotated[str, msgspec.Meta(description="workspace-relative directory")] = "."


class GrepArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pattern: Annotated[str, msgspec.Meta(description="Python regex")]
    path: Annotated[str, msgspec.Meta(description="file or directory to search")] = "."


class ListResult(msgspec.Struct, frozen=True, omit_defaults=True):
    items: tuple[str, ...]
    truncated: str | None = None


class BashArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    command: str
    timeout_ms: Annotated[int, msgspec.Meta(ge=1, description="default 120000, max 600000")] | UnsetType = UNSET


class BashResult(msgspec.Struct, frozen=True, omit_defaults=True):
    exit_code: int
    output: str
    output_bytes: int
    truncated: bool = False
