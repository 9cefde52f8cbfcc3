"""Validate a raw config table into an attrs class, with errors that name the field.

Plugins receive their profile table as a plain mapping (``ctx.config``) and turn it
into a typed, frozen attrs instance with :func:`structure_config`. The profile
loader uses the same function, so every configuration error a user can make
(unknown key, wrong type, out-of-range value) reads the same way and names its
path: ``extra fields found (max_memebrs) @ plugins.dsh-team``.

Why a fresh converter per call: cattrs caches generated hooks per class object, and
hot reload replaces plugin classes; config is structured once per load, so the
small cost buys reload safety. Why strict scalar hooks: cattrs' defaults call
``int(value)`` / ``str(value)``, which would silently turn ``1.5`` into ``1`` and
``3`` into ``"3"`` -- a config typo must fail, not be coerced.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

import cattrs

from host_spec.errors import ConfigError

__all__ = ["structure_config"]

T = TypeVar("T")

_KEY_IN_PATH = re.compile(r"\['([^']*)'\]")


class _StrictTypeError(TypeError):
    """A scalar of the wrong type; its message is shown as is."""


def _strict(expected: tuple[type, ...], label: str, cast: type) -> Callable[[Any, Any], Any]:
    def hook(value: Any, _type: Any) -> Any:
        if isinstance(value, bool) and bool not in expected:
            raise _StrictTypeError(f"expected {label}, got bool")
        if not isinstance(value, expected):
            raise _StrictTypeError(f"expected {label}, got {type(value).__name__}")
        return cast(value)

    return hook


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(int, _strict((int,), "an integer", int))
    converter.register_structure_hook(float, _strict((int, float), "a number", float))
    converter.register_structure_hook(str, _strict((str,), "a string", str))
    converter.register_structure_hook(bool, _strict((bool,), "a boolean", bool))
    return converter


def _format(exc: BaseException, typ: type | None) -> str:
    """Pass our own and attrs-validator messages through (they name the field)."""
    if isinstance(exc, _StrictTypeError):
        return str(exc)
    if isinstance(exc, cattrs.errors.CattrsError) and typ is not None and get_origin(typ) is Literal:
        allowed = ", ".join(repr(choice) for choice in get_args(typ))
        return f"expected one of {allowed}"
    if isinstance(exc, (ValueError, TypeError)) and typ is None and exc.args:
        return str(exc.args[0])
    return cattrs.v.format_exception(exc, typ)


def _dotted(message: str) -> str:
    return _KEY_IN_PATH.sub(r".\1", message)


def structure_config(cls: type[T], raw: Any, path: str) -> T:
    """Structure ``raw`` into ``cls`` or raise :class:`ConfigError` naming the field path.

    Args:
        cls: An attrs class describing the table (frozen, with defaults and validators).
        raw: The raw mapping from the profile (``ctx.config``); ``None`` means empty.
        path: Where the table lives, e.g. ``"plugins.dsh-team"``; it prefixes every error.

    Returns:
        The validated instance.

    Raises:
        ConfigError: an unknown key, a wrong type or a failed validator. The message
            lists every problem found (``"; "``-joined); ``.path`` is the first one's.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"expected a table, got {type(raw).__name__}", path=path)
    try:
        return _make_converter().structure(dict(raw), cls)
    except Exception as exc:  # cattrs raises ExceptionGroups and plain errors alike
        messages = [_dotted(m) for m in cattrs.transform_error(exc, path=path, format_exception=_format)]
        first = messages[0]
        where = first.rsplit(" @ ", 1)[1] if " @ " in first else path
        raise ConfigError("; ".join(messages), path=where) from None
