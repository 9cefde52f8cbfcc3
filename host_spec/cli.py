"""The CLI extension contract: how a plugin distribution adds ``dsh`` subcommands.

A host's command line is not a plugin hook (it runs before, and often without, any
plugin manager), yet plugins know things only they can show (``dsh team show``
folds a Lead log with the Team's own fold). So a distribution declares entry
points in group :data:`CLI_ENTRY_POINT_GROUP` (``dsh.cli``)::

    [project.entry-points."dsh.cli"]
    team = "dsh_team.cli:register"

Each entry point is a callable ``register(subparsers, env)``. ``subparsers`` is the
``argparse`` sub-parsers action of the ``dsh`` command: the callable adds its
command(s) and sets the default ``dsh_handler`` to ``handler(args) -> int`` (or an
awaitable of ``int``), the process exit status. ``env`` (:class:`CliEnv`) is what
the host offers a command: its ``--data-dir`` option and a *read-only* view of a
data directory's stored sessions, so the extension never imports the host. A
command that must write to a stopped run (``dsh team send``) opens one stored
session with :meth:`CliEnv.open_appender`: the session tree's lock is taken
exactly as a run takes it, so a run live in another process refuses it
(``SESSION_LOCKED``) instead of racing it.

Handlers raise :class:`~host_spec.errors.DshError` for bad input; the host prints
``dsh: <code>: <message>`` and exits 2, as for its own commands.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from host_spec.errors import SessionCorruptError
from host_spec.events import Event, SessionHeader
from host_spec.worktrees import Worktrees

__all__ = [
    "CLI_ENTRY_POINT_GROUP", "HANDLER_KEY", "StoredLog", "SessionReader", "SessionFollower", "FollowingReader",
    "SessionAppender", "CliEnv",
]

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
    """Read-only access to one data directory's stored sessions. Never locks, repairs or writes.

    A reader may also offer its store's checkpoints
    (:class:`host_spec.storage.CheckpointingBackend`): a view then starts its folds
    from one the log confirms, instead of folding the whole log.
    """

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


class SessionFollower(Protocol):
    """The new events of sessions another process appends to, each handed on once, in seq order.

    A shared store's reader offers it (:class:`FollowingReader`); a data directory's
    does not. Events arrive on the follower's own thread.
    """

    def watch(self, session_id: str, after: int) -> None:
        """Follow ``session_id`` from seq ``after`` (the events a caller already has); idempotent."""
        ...

    def start(self, deliver: Callable[[SessionHeader, Sequence[Event]], None]) -> None:
        """Begin: ``deliver(header, events)`` gets each session's new batch (the events after the last one handed on)."""
        ...

    def close(self) -> None:
        """Stop following (bounded); nothing is delivered after it returns."""
        ...


@runtime_checkable
class FollowingReader(SessionReader, Protocol):
    """A :class:`SessionReader` of a store several processes share: it can follow and name a run's holder."""

    def follower(self) -> SessionFollower:
        """A new, not yet started follower of this store."""
        ...

    def holder(self, session_id: str) -> str | None:
        """The process holding ``session_id``'s session tree now (``None``: no live holder)."""
        ...


class SessionAppender(Protocol):
    """A stored session opened for appending by a command, its tree's lock held until :meth:`close`.

    Nothing runs: no agent, no plugin hook, no invariant; the command checks what it
    appends itself (with the same fold a run would use).
    """

    @property
    def events(self) -> Sequence[Event]:
        """The session's events, a torn tail already repaired, and every event appended here."""
        ...

    def append(self, event_type: str, payload: object) -> Event:
        """Append one event after the last one; durable (fsynced) when it returns.

        Raises:
            InvalidEventError: ``payload`` is not lossless JSON.
            OSError: the write or its fsync failed (nothing was appended).
        """
        ...

    def extend(self, events: Sequence[tuple[str, object]]) -> list[Event]:
        """Append ``(event type, payload)`` events as one batch, made durable by one fsync.

        For records that only mean something together (a decision and the message that
        tells it): a torn batch loses its tail the way a crashed run's does.

        Raises:
            InvalidEventError / OSError: as for :meth:`append` (nothing was appended).
        """
        ...

    def close(self) -> None:
        """Release the session and its tree's lock (idempotent)."""
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

    def worktrees(self) -> Worktrees | None:
        """The host's git worktrees (``dsh team show``'s commits ahead, ``dsh team diff``); ``None``: it has none."""

    def sandbox_policies(
        self, data_dir: Path, session_id: str, members: Sequence[str], roles: Mapping[str, str] | None = None
    ) -> Mapping[str, str] | None:
        """Each of ``members``' sandbox policy (``read-only``, ``workspace-write``, ``full``) in run ``session_id``.

        ``roles`` maps a member's name to the role it was spawned with (absent: none).

        Read from the profile the run recorded when it started (``dsh resume`` uses the
        same one). ``None``: the run recorded none, or its profile cannot be read now.
        """
        ...

    def open_appender(self, data_dir: Path, session_id: str) -> SessionAppender:
        """Open a stored session of ``data_dir`` for appending (see :class:`SessionAppender`).

        Raises:
            DshError: the data-dir errors of :meth:`open_store`.
            SessionLockedError: ``SESSION_LOCKED``, a session of its tree is open in another process.
            SessionNotFoundError / SessionCorruptError / SessionFormatError: as for reading it.
        """
        ...

    def plugin_config(self, data_dir: Path, session_id: str, plugin: str) -> Mapping[str, Any]:
        """The config table the profile a stored run was started with gives ``plugin`` (empty: none).

        A command that writes into a stopped run holds what it writes to the limits the
        run itself applies (its profile's), never to the plugin's defaults.

        Raises:
            DshError: the profile's errors (the recorded profile no longer loads).
        """
        ...
