"""Which storage backend a command opens: JSONL files under a directory, or a PostgreSQL database.

The JSONL files stay the embedded default. A shared store is chosen, in this
order, by ``--store URL`` on the command line, the ``DSH_STORE`` environment
variable, or ``[store] url`` in the profile (the outermost file that sets it
wins); a ``postgresql://`` (or ``postgres://``) URL opens a
:class:`~host_spec.host.store.postgres.PostgresStore`, which needs the
``postgres`` extra. Nothing above the store knows which backend runs.

A value that is not a store URL is quoted in its ``STORE_INVALID`` message
through :func:`~host_spec.host.redaction.redact_url`: a ``mysql://user:secret@...``
shows its user and host, never its password. This module imports no database driver, so a host without the extra still
starts and only a store URL asks for it.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from host_spec.errors import ConfigError
from host_spec.extras import require
from host_spec.storage import StorageBackend

from host_spec.host.redaction import redact_url

__all__ = ["LEASE_ENV", "STORE_ENV", "chosen_store", "is_store_url", "open_backend", "profile_store_url"]

#: The environment variable naming a shared store.
STORE_ENV = "DSH_STORE"
#: Seconds a shared store's lease lasts unrenewed: how soon another process may take over a crashed one's Team.
LEASE_ENV = "DSH_LEASE_SECONDS"


def is_store_url(text: object) -> bool:
    """Whether ``text`` names a PostgreSQL store (``postgresql://`` or ``postgres://``)."""
    return isinstance(text, str) and text.startswith(("postgresql://", "postgres://"))


def open_backend(location: str | os.PathLike[str], **options: Any) -> StorageBackend:
    """The backend at ``location``: a store URL, else a JSONL data directory.

    ``options`` go to :class:`PostgresStore` (``lease_seconds``, ``retry_seconds``, ``holder``);
    without ``lease_seconds``, ``$DSH_LEASE_SECONDS`` sets it.

    Raises:
        ExtraNotInstalledError: ``EXTRA_NOT_INSTALLED`` when a URL is given without the ``postgres`` extra.
        ConfigError: ``STORE_INVALID`` when ``$DSH_LEASE_SECONDS`` is not a positive number.
    """
    if is_store_url(location):
        lease = os.environ.get(LEASE_ENV)
        if lease and "lease_seconds" not in options:
            try:
                options["lease_seconds"] = float(lease)
            except ValueError:
                options["lease_seconds"] = -1.0
            if not 0 < options["lease_seconds"] < 86_400:
                raise ConfigError(f"{LEASE_ENV} must be a number of seconds above 0, got {lease!r}",
                                  code="STORE_INVALID")
        require("psycopg", extra="postgres", feature="a PostgreSQL store (--store postgresql://...)")
        from host_spec.host.store.postgres import PostgresStore

        return PostgresStore(str(location), **options)
    from host_spec.host.store.jsonl import JsonlStore

    return JsonlStore(Path(location))


def profile_store_url(spec: str | os.PathLike[str] | None) -> str | None:
    """``[store] url`` of a profile file and the files it extends (the outermost setting wins).

    Built-in profile names set no store.

    Raises:
        ConfigError: ``store.url`` is not a store URL, or ``[store]`` has another key.
    """
    if spec is None:
        return None
    path = Path(os.fspath(spec))
    if path.suffix != ".toml" or not path.is_file():
        return None
    seen: set[Path] = set()
    while path not in seen:
        seen.add(path)
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            return None  # load_profile reports the file itself, with its path
        store = table.get("store")
        if store is not None:
            if not isinstance(store, dict) or set(store) - {"url"}:
                raise ConfigError(f"profile {path}: [store] takes only url", path="store")
            url = store.get("url")
            if not is_store_url(url):
                shown = redact_url(url) if isinstance(url, str) else url
                raise ConfigError(f"profile {path}: store.url must be a postgresql:// URL, got {shown!r}",
                                  path="store.url", code="STORE_INVALID")
            return str(url)
        extends = table.get("extends")
        if not isinstance(extends, str) or not extends.endswith(".toml"):
            return None
        path = (path.parent / extends).resolve()
    return None


def chosen_store(flag: str | None, profile: str | os.PathLike[str] | None = None) -> str | None:
    """The store URL a command uses: ``--store``, else ``$DSH_STORE``, else the profile's; ``None``: JSONL.

    Raises:
        ConfigError: ``STORE_INVALID`` when the flag or variable is not a store URL.
    """
    for value, where in ((flag, "--store"), (os.environ.get(STORE_ENV) or None, STORE_ENV)):
        if value is not None:
            if not is_store_url(value):
                raise ConfigError(f"{where} must be a postgresql:// URL, got {redact_url(value)!r}", code="STORE_INVALID")
            return value
    return profile_store_url(profile)
