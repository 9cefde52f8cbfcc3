"""The CLI extension contract: how a plugin distribution adds ``dsh`` subcommands.

A host's command line is not a plugin hook (it runs before, and often without, any
plugin manager), yet plugins know things only they can show (``dsh team show``
folds a Lead log with the Team's own fold). So a distribution declares entry
points in group :data:`CLI_ENTRY_POINT_GROUP` (``dsh.cli``)::

    [project.entry-points."dsh.cli"]
    team = "dsh_team.views.cli:register"

Each entry point is a callable ``register(subparsers, env)``. ``subparsers`` is the
``argparse`` sub-parsers action of the ``dsh`` command: the callable adds its
command(s) and sets the default ``dsh_handler`` to ``handler(args) -> int`` (or an
awaitable of ``int``), the process exit status. ``env`` (:class:`CliEnv`) is what
the host offers a command: its ``--data-dir`` option and a *read-only* view of a
data directory's stored sessions, so the extension never imports the host.

Handlers raise :class:`~host_spec.errors.DshError` for bad input; the host prints
``dsh: <code>: <message>`` and exits 2, as for its own commands.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Protocol

import attrs

from host_spec.errors import SessionCorruptError
from host_spec.events import Event, SessionHeader

__all__ = ["CLI_ENTRY_POINT_GROUP", "HANDLER_KEY", "StoredLog", "SessionReader", "CliEnv"]

#: Entry-point group of CLI extensions.
CLI_ENTRY_POINT_GROUP: Final = "dsh.cli"

#: The ``argparse`` default an extension sets to its handler (``parser.set_defaults(dsh_handler=fn)``).
HANDLER_KEY: Final = "dsh_handler"


@attrs.frozen
class StoredLog:
    """A stored session read without activating it.

    Attributes:
        header: The log's header line.
        events: The readable events, ``events[i].seq == i + 1`` (a torn final line is
            already dropped, as on resume).
        damage: ``None`` for a sound log. With ``salvage=True`` a log whose committed
            region is damaged comes back with the events before the damage and the
            error that describes it (``events`` then end just before it).
    """

    header: SessionHeader
    events: Sequence[Event]
    damage: SessionCorruptError | None = None


class SessionReader(Protocol):
    """Read-only access to one data directory's stored sessions. Never locks, repairs or writes."""

    @property
    def root(self) -> Path:
        """The data directory."""
        ...

    def list_ids(self) -> list[str]:
        """Stored session ids in creation order."""
        ...

    def header(self, session_id: str) -> SessionHeader:
        """The header of a stored session (reads only its first line).

        Raises:
            SessionNotFoundError: nothing is stored under this id.
            SessionCorruptError / SessionFormatError: the header is unreadable.
        """
        ...

    def roots(self) -> list[str]:
        """Ids of stored root sessions (no parent), in creation order."""
        ...

    def latest_root(self) -> str:
        """The most recently created root session.

        Raises:
            SessionCorruptError: a stored log's header is damaged, so the most recent
                root cannot be told (never a silent choice of another session).
            SessionNotFoundError: the directory holds no root session.
        """
        ...

    def read(self, session_id: str, *, salvage: bool = False) -> StoredLog:
        """The header and events of a stored session.

        Raises:
            SessionNotFoundError: nothing is stored under this id.
            SessionCorruptError: the committed region is damaged (unless ``salvage``;
                a damaged *header* raises even then).
            SessionFormatError: the log was written in a foreign format version.
        """
        ...


class CliEnv(Protocol):
    """What the host offers a CLI extension."""

    def add_data_dir(self, parser: argparse.ArgumentParser) -> None:
        """Add the host's ``--data-dir`` option (same default and help as built-in commands)."""
        ...

    def open_store(self, data_dir: Path) -> SessionReader:
        """A read-only reader of ``data_dir``; never creates it.

        Raises:
            DshError: ``DATA_DIR_NOT_FOUND`` (missing) or ``DATA_DIR_UNUSABLE`` (not a
                readable directory).
        """
        ...

    async def append_events(self, data_dir: Path, session_id: str, events: Sequence[tuple[str, Any]]) -> int:
        """Append ``(event type, payload)`` events to a stored session no process has open; returns its last seq.

        The one write an extension may make, for a decision a user takes while no run
        is live (a plan approval). The session's log is opened for writing as a resume
        would (its lock taken: a live run refuses it), the events appended and made
        durable, the log closed. No plugin runs: the caller must have checked the
        events against the fold it owns.

        Raises:
            DshError: the data-dir errors of :meth:`open_store`; ``SESSION_LOCKED`` (a
                run holds the session), ``SESSION_NOT_FOUND``.
        """
        ...
