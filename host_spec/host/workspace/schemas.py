"""Argument and result types of the workspace tools (the model reads the argument schemas).

Descriptions are short on purpose: every byte is paid on every model step.
Results are compact: a digest the model can pass back as ``expected_sha256``, the
few numbers it needs, and ``warnings`` only when there are some.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = [
    "ReadArgs", "ReadResult", "WriteArgs", "EditArgs", "WriteResult",
    "GlobArgs", "ListArgs", "GrepArgs", "ListResult", "BashArgs", "BashResult",
]

Path = Annotated[str, msgspec.Meta(description="path relative to the workspace root")]
Sha = Annotated[str | None, msgspec.Meta(description="fail unless the file's current sha256 is this")]


class ReadArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    path: Path
    offset: Annotated[int, msgspec.Meta(ge=1, description="first line to show (1-based)")] = 1
    limit: Annotated[int, msgspec.Meta(ge=1, description="max lines to show")] | None = None


class ReadResult(msgspec.Struct, frozen=True, omit_defaults=True):
    path: str
    sha256: str
    lines: int
    content: str
    note: str | None = None


class WriteArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    path: Path
    content: str
    expected_sha256: Sha = None


class EditArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    path: Path
    old_string: Annotated[str, msgspec.Meta(description="exact text to replace")]
    new_string: str
    expected_count: Annotated[int, msgspec.Meta(
        ge=1, description="replace all occurrences; fails unless there are exactly this many")] | None = None
    expected_sha256: Sha = None


class WriteResult(msgspec.Struct, frozen=True, omit_defaults=True):
    path: str
    sha256: str
    bytes: int
    created: bool = False
    replaced: int = 0
    warnings: tuple[str, ...] = ()


class GlobArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pattern: Annotated[str, msgspec.Meta(description="glob like src/**/*.py; .gitignore applies")]


class ListArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    path: Annotated[str, msgspec.Meta(description="directory relative to the workspace root")] = "."


class GrepArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pattern: Annotated[str, msgspec.Meta(description="Python regular expression")]
    path: Annotated[str, msgspec.Meta(description="file or directory to search")] = "."


class ListResult(msgspec.Struct, frozen=True, omit_defaults=True):
    items: tuple[str, ...]
    truncated: str | None = None


class BashArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    command: str
    timeout_ms: Annotated[int, msgspec.Meta(ge=1, description="default 120000, max 600000")] | None = None


class BashResult(msgspec.Struct, frozen=True, omit_defaults=True):
    exit_code: int
    output: str
    output_bytes: int
    truncated: bool = False
