"""Request field checks shared by the task board, the roster and the mailbox.

Every check raises a :class:`TeamError` with its stable code, before
anything is appended, so a malformed request never leaves a trace in the log.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from host_spec.errors import InvalidEventError
from host_spec.events import encode_data, json_decode

from dsh_team.errors import TeamCode, TeamError
from dsh_team.core.content import validate_content

__all__ = [
    "check_content",
    "check_controls",
    "LINE_CONTROLS",
    "SUBJECT_MAX",
    "DESCRIPTION_MAX",
    "required_text",
    "text_list",
    "check_list",
    "CHECKS_MAX",
    "CHECK_CHARS_MAX",
    "normalize_write_scope",
    "normalize_write_scopes",
]

#: Maximum characters of a task subject (after trimming).
SUBJECT_MAX: Final = 200
#: Maximum characters of a task description (after trimming).
DESCRIPTION_MAX: Final = 16384

_DRIVE: Final = re.compile(r"^[A-Za-z]:")

#: Control characters free text keeps: line breaks and tabs.
LINE_CONTROLS: Final = frozenset("\n\r\t")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def check_controls(text: str, field: str, *, allowed: frozenset[str] = frozenset()) -> str:
    """``text`` unchanged if it holds no control character outside ``allowed``.

    NUL and the other C0 controls (and DEL) are invisible in a terminal and the
    browser, and can break what reads them later, so one-line fields (names,
    subjects, scopes) refuse all of them and free text keeps only ``allowed``.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` naming ``field`` and the character.
    """
    if _CONTROL.search(text) is None:  # the usual text: one scan in C, no iterator
        return text
    for found in _CONTROL.finditer(text):
        if found.group() not in allowed:
            raise TeamError(
                f"{field} must not contain control character U+{ord(found.group()):04X}",
                TeamCode.INVALID_ARGUMENT,
                field=field,
            )
    return text


def required_text(value: Any, field: str, max_length: int, *, allowed: frozenset[str] = frozenset()) -> str:
    """``value`` trimmed; a non-blank string of at most ``max_length`` characters, no controls but ``allowed``.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` naming ``field``.
    """
    if not isinstance(value, str):
        raise TeamError(f"{field} must be a string", TeamCode.INVALID_ARGUMENT, field=field)
    text = value.strip()
    if not text:
        raise TeamError(f"{field} must not be blank", TeamCode.INVALID_ARGUMENT, field=field)
    if len(text) > max_length:
        raise TeamError(
            f"{field} must be at most {max_length} characters", TeamCode.INVALID_ARGUMENT, field=field
        )
    return check_controls(text, field, allowed=allowed)


def text_list(value: Any, field: str) -> tuple[str, ...]:
    """``value`` as a tuple of strings; it must be a list (or tuple) of strings.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` naming ``field``.
    """
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise TeamError(f"{field} must be a list of strings", TeamCode.INVALID_ARGUMENT, field=field)
    return tuple(value)


#: Checks one task may carry, and the characters of one.
CHECKS_MAX: Final = 16
CHECK_CHARS_MAX: Final = 2000


def check_list(value: Any) -> tuple[str, ...]:
    """A task's quality checks: a list of non-blank commands or check names, bounded in count and length.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` naming ``checks``.
    """
    checks = text_list(value, "checks")
    if len(checks) > CHECKS_MAX or any(not check.strip() or len(check) > CHECK_CHARS_MAX for check in checks):
        raise TeamError(
            f"checks must be at most {CHECKS_MAX} non-blank commands of at most {CHECK_CHARS_MAX} characters",
            TeamCode.INVALID_ARGUMENT,
            field="checks",
        )
    return checks


def normalize_write_scope(value: str) -> str:
    """One workspace-relative write scope, normalised (no absolute path, drive letter, or empty/``.``/``..`` segment).

    Backslashes become ``/``, one leading ``./`` and every trailing ``/`` are
    removed. No whitespace trimming: a scope is a path prefix, taken literally.

    Raises:
        TeamError: ``TEAM_INVALID_WRITE_SCOPE`` when the result is empty, absolute, has
            a drive letter, or has an empty, ``.`` or ``..`` segment.
    """
    check_controls(value, "write_scopes")
    scope = value.replace("\\", "/")
    if scope.startswith("./"):
        scope = scope[2:]
    scope = scope.rstrip("/")
    if (
        not scope
        or scope.startswith("/")
        or _DRIVE.match(scope)
        or any(segment in ("", ".", "..") for segment in scope.split("/"))
    ):
        raise TeamError(
            f'invalid workspace-relative write scope "{value}"', TeamCode.INVALID_WRITE_SCOPE, scope=value
        )
    return scope


def normalize_write_scopes(value: Any) -> tuple[str, ...]:
    """Normalise and de-duplicate a scope list, keeping first-seen order.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` for a non-list, ``TEAM_INVALID_WRITE_SCOPE``
            for the first bad entry.
    """
    scopes: dict[str, None] = {}
    for item in text_list(value, "write_scopes"):
        scopes.setdefault(normalize_write_scope(item), None)
    return tuple(scopes)


def check_content(content: Any, field: str = "content") -> tuple[dict[str, Any], ...]:
    """A deep copy of ``content``: a non-empty list of valid, lossless-JSON content blocks.

    Used for a message's content and a teammate's initial prompt alike: either is
    checked before anything durable is written (a bad prompt must not burn a
    teammate name and slot forever). Content made only of blank text says
    nothing and is refused; text keeps line breaks and tabs but no other control
    character.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` naming ``field``.
    """
    if not isinstance(content, (list, tuple)) or not content:
        raise TeamError(f"{field} must be a non-empty list of content blocks", TeamCode.INVALID_ARGUMENT, field=field)
    try:
        copied = tuple(json_decode(encode_data(list(content))))
        validate_content(copied)
    except (InvalidEventError, ValueError) as exc:
        raise TeamError(f"invalid {field}: {exc}", TeamCode.INVALID_ARGUMENT, field=field) from None
    texts = [block["text"] for block in copied if block.get("type") == "text"]
    if len(texts) == len(copied) and not any(text.strip() for text in texts):
        raise TeamError(f"{field} must not be blank", TeamCode.INVALID_ARGUMENT, field=field)
    for text in texts:
        check_controls(text, field, allowed=LINE_CONTROLS)
    return copied
