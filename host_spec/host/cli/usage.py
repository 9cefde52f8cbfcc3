"""What the ``dsh`` command checks itself before a host starts: the data directory and the workspace.

A bad path is a usage problem, not a failure of the run: it is reported as
:class:`CliError` (``dsh: <code>: <message>``, exit 2) with a code that says which
check failed, before anything is created or locked. The data directory defaults to
``$DSH_DATA_DIR``, else ``./.dsh-data``, read each time a parser is built, so an
environment set by a caller (a test, a wrapper script) is honoured.
"""

from __future__ import annotations

import os
from pathlib import Path

from host_spec.errors import DshError

__all__ = ["DEFAULT_DATA_DIR", "CliError", "check_data_dir", "default_data_dir", "workspace_dir"]

DEFAULT_DATA_DIR = ".dsh-data"


class CliError(DshError):
    """A usage problem the CLI detects itself (data directory, missing session)."""

    code = "CLI_ERROR"


def default_data_dir() -> str:
    """The ``--data-dir`` default: ``$DSH_DATA_DIR``, else ``./.dsh-data``."""
    return os.environ.get("DSH_DATA_DIR") or DEFAULT_DATA_DIR


def check_data_dir(path: Path, *, create: bool) -> Path:
    """``path`` as a usable data directory, created first when ``create`` (a new run).

    Raises:
        CliError: ``DATA_DIR_NOT_FOUND`` (missing and not to be created) or
            ``DATA_DIR_UNUSABLE`` (not a directory, not creatable, not accessible).
    """
    if path.exists() and not path.is_dir():
        raise CliError(f"data dir {path} is not a directory", code="DATA_DIR_UNUSABLE")
    if not path.exists():
        if not create:
            raise CliError(f"data dir {path} does not exist", code="DATA_DIR_NOT_FOUND")
        try:
            path.mkdir(parents=True)
        except OSError as exc:
            raise CliError(f"cannot create data dir {path}: {exc.strerror}", code="DATA_DIR_UNUSABLE") from None
    if not os.access(path, os.R_OK | os.X_OK | (os.W_OK if create else 0)):
        raise CliError(f"data dir {path} is not accessible", code="DATA_DIR_UNUSABLE")
    return path


def workspace_dir(path: Path) -> str:
    """The real path of the workspace directory the agents' tools work in.

    Raises:
        CliError: ``WORKSPACE_NOT_FOUND`` when ``path`` is not a directory.
    """
    if not path.is_dir():
        raise CliError(f"workspace {path} is not a directory", code="WORKSPACE_NOT_FOUND")
    return os.path.realpath(path)
