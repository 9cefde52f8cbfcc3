"""CLI extensions of the ``dsh`` command: discovery and the environment they get.

Plugin distributions add subcommands through entry-point group ``dsh.cli`` (see
:mod:`host_spec.cli`). This module finds them and hands each one a
:class:`CliEnvironment`: the shared ``--data-dir`` option and a read-only
:class:`StoreReader`, so an extension reads session logs exactly as the host
does (same torn-tail rule, same errors) without importing the host.

A broken extension must not take the built-in commands down with it: one that
fails to import or register is reported on stderr and skipped.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import attrs

from host_spec.cli import CLI_ENTRY_POINT_GROUP, StoredLog
from host_spec.errors import DshError, SessionCorruptError, SessionNotFoundError
from host_spec.events import Event, SessionHeader, encode_data
from host_spec.storage import SessionLog

from host_spec.host.cli.run_settings import RunSettings, decode_settings, lookup
from host_spec.host.plugins.profiles import load_profile
from host_spec.host.store.jsonl_format import parse_header, parse_log
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.jsonl_checkpoints import JsonlCheckpoints
from host_spec.host.store.selection import STORE_ENV, chosen_store, open_backend

__all__ = ["StoreReader", "StoreAppender", "CliEnvironment", "discover_extensions", "register_extensions"]

#: ``(name, callable)`` pairs: a CLI extension's ``register(subparsers, env)``, a trace contributor.
Extension = tuple[str, Callable[..., Any]]


def _line_offset(data: bytes, lineno: int) -> int:
    """Byte offset where 1-based line ``lineno`` starts."""
    offset = 0
    for _ in range(lineno - 1):
        offset = data.index(b"\n", offset) + 1
    return offset


@attrs.define(eq=False)
class StoreReader:
    """Read-only view of a data directory (implements ``host_spec.cli.SessionReader``).

    It also offers the store's checkpoints (``host_spec.storage.CheckpointingBackend``),
    which a view may start its folds from once the log confirms them; it never writes one.
    """

    store: JsonlStore

    @property
    def checkpoints(self) -> JsonlCheckpoints:
        return self.store.checkpoints

    @property
    def root(self) -> Path:
        return self.store.root

    def list_ids(self) -> list[str]:
        return self.store.list_ids()

    def header(self, session_id: str) -> SessionHeader:
        path = self.store.path(session_id)
        try:
            with path.open("rb") as handle:
                line = handle.readline().rstrip(b"\n")
        except FileNotFoundError:
            raise SessionNotFoundError(f"session {session_id} not found in {self.root}", session=session_id) from None
        return parse_header(line, path)

    def roots(self) -> list[str]:
        return [sid for sid in self.list_ids() if self.header(sid).parent_session is None]

    def latest_root(self) -> str:
        """The most recent root session.

        Raises:
            SessionCorruptError: a stored log's header is damaged (``SessionFormatError``
                for a header of an unsupported format): it may be the most
                recent root, so no other session is chosen silently (name one instead).
            SessionNotFoundError: no root session is stored.
        """
        ids, damaged = self.store.scan()
        if damaged:
            first = damaged[0]
            raise type(first)(
                f"{first.message}; cannot choose the most recent root session: repair that file or name a session",
                **first.details,
            )
        found = [sid for sid in ids if self.header(sid).parent_session is None]
        if not found:
            raise SessionNotFoundError(f"no root session stored in {self.root}")
        return found[-1]

    def read(self, session_id: str, *, salvage: bool = False) -> StoredLog:
        if not self.store.exists(session_id):
            raise SessionNotFoundError(f"session {session_id} not found in {self.root}", session=session_id)
        try:
            header, events = self.store.read(session_id)
        except SessionCorruptError as exc:
            line = exc.details.get("line")
            if not salvage or not isinstance(line, int):
                raise
            path = self.store.path(session_id)
            data = path.read_bytes()
            scan = parse_log(path, data[: _line_offset(data, line)])
            return StoredLog(scan.header, scan.events, exc)
        return StoredLog(header, events)


@attrs.define(eq=False)
class StoreAppender:
    """One stored session open for appending (implements ``host_spec.cli.SessionAppender``).

    Each ``append`` or ``extend`` batch is written and fsynced before it returns:
    a command appends one or two events, and each must be durable before it
    reports success.
    """

    log: SessionLog
    events: list[Event]

    def append(self, event_type: str, payload: object) -> Event:
        return self.extend([(event_type, payload)])[0]

    def extend(self, events: Sequence[tuple[str, object]]) -> list[Event]:
        last, now = len(self.events), int(time.time() * 1000)
        batch = [
            Event(seq=last + i, time=now, type=event_type, data=encode_data(payload))
            for i, (event_type, payload) in enumerate(events, start=1)
        ]
        self.log.append(batch, expected_seq=last)
        self.log.sync()
        self.events.extend(batch)
        return batch

    def close(self) -> None:
        self.log.close()


@attrs.define(eq=False)
class CliEnvironment:
    """What an extension's ``register`` gets (implements ``host_spec.cli.CliEnv``).

    Args:
        default_data_dir: ``() -> str``, the ``--data-dir`` default (read per parser build).
        check_data_dir: ``(path, create=False) -> path``; raises the host's data-dir errors.
    """

    default_data_dir: Callable[[], str]
    check_data_dir: Callable[..., Path]
    #: ``--store`` as parsed for this command (one command per process), else ``None``.
    store_flag: str | None = None

    def add_data_dir(self, parser: argparse.ArgumentParser) -> None:
        """Add ``--data-dir`` and ``--store`` (a shared store replaces the data directory's logs)."""
        parser.add_argument("--data-dir", default=self.default_data_dir(), type=Path,
                            help="session store root (default: $DSH_DATA_DIR or ./.dsh-data)")
        env = self

        class _StoreFlag(argparse.Action):
            def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
                setattr(namespace, self.dest, values)
                env.store_flag = values

        parser.add_argument("--store", default=None, metavar="URL", action=_StoreFlag,
                            help=f"shared store, e.g. postgresql://user@host/db (default: ${STORE_ENV}; "
                                 "else the JSONL files under --data-dir)")

    def open_store(self, data_dir: Path) -> Any:
        """A read-only reader (``host_spec.cli.SessionReader``) of the chosen store."""
        url = chosen_store(self.store_flag)
        if url is not None:
            backend = open_backend(url)  # first: it names the postgres extra when it is missing
            from host_spec.host.cli.backend_reader import BackendReader

            return BackendReader(backend)
        return StoreReader(JsonlStore(self.check_data_dir(Path(data_dir), create=False)))

    def worktrees(self) -> Any:
        """The host's git worktrees (``host_spec.worktrees.Worktrees``), as the ``workspace`` plugin provides them."""
        from host_spec.host.worktrees.git import GitWorktrees

        return GitWorktrees()

    def sandbox_policies(
        self, data_dir: Path, session_id: str, members: Sequence[str], roles: Mapping[str, str] | None = None
    ) -> Mapping[str, str] | None:
        """Each member's policy under the profile run ``session_id`` recorded (``None``: none readable)."""
        settings = self._run_settings(data_dir, session_id)
        if settings is None:
            return None
        try:
            sandbox = load_profile(settings.profile).sandbox
        except DshError:
            return None
        roles = roles or {}
        return {member: sandbox.policy_for(member, roles.get(member)).name for member in members}

    def _run_settings(self, data_dir: Path, session_id: str) -> RunSettings | None:
        """The profile and model run ``session_id`` recorded when it started (``None``: no readable record)."""
        url = chosen_store(self.store_flag)
        if url is None:
            return lookup(self.check_data_dir(Path(data_dir), create=False), session_id)
        shared: Any = open_backend(url)  # a shared store keeps run records (get_run)
        try:
            data = shared.get_run(session_id)
        finally:
            shared.close()
        return decode_settings(data) if data is not None else None

    def open_appender(self, data_dir: Path, session_id: str) -> StoreAppender:
        """The chosen store's session ``session_id`` opened for writing, as a resume opens it."""
        url = chosen_store(self.store_flag)
        if url is not None:
            backend = open_backend(url)
            where = "the shared store"
        else:
            backend = JsonlStore(self.check_data_dir(Path(data_dir), create=False))
            where = str(backend.root)
        if not backend.exists(session_id):
            raise SessionNotFoundError(f"session {session_id} not found in {where}", session=session_id)
        log_, events = backend.resume(session_id)
        return StoreAppender(log_, list(events))

    def plugin_config(self, data_dir: Path, session_id: str, plugin: str) -> Mapping[str, Any]:
        """``plugin``'s table in the profile ``session_id`` was started with (its run record).

        A run with no readable record (started before records existed, or by another
        host) has no profile to name: its table is empty, so the plugin's defaults apply.
        """
        settings = self._run_settings(data_dir, session_id)
        if settings is None:
            return {}
        return load_profile(settings.profile).config(plugin) or {}


def discover_extensions(group: str = CLI_ENTRY_POINT_GROUP, *, what: str = "CLI extension") -> list[Extension]:
    """Installed entry points of ``group`` (default ``dsh.cli``), loaded, by name.

    A failing import is reported (as a ``what``) and skipped. A name declared twice
    with the same target (one distribution seen twice on the path) loads once; with
    different targets the later declaration is reported and skipped.
    """
    found: list[Extension] = []
    seen: dict[str, str] = {}
    for ep in sorted(entry_points(group=group), key=lambda ep: ep.name):
        first = seen.get(ep.name)
        if first is not None:
            if first != ep.value:
                print(f'dsh: warning: {what} "{ep.name}" is declared twice ({first}, {ep.value}); '
                      f"using {first}", file=sys.stderr)
            continue
        seen[ep.name] = ep.value
        try:
            found.append((ep.name, ep.load()))
        except Exception as exc:
            print(f'dsh: warning: {what} "{ep.name}" failed to import: {type(exc).__name__}: {exc}',
                  file=sys.stderr)
    return found


def register_extensions(commands: Any, env: CliEnvironment, extensions: Iterable[Extension]) -> None:
    """Let each extension add its commands; one that fails is reported and skipped."""
    for name, register in extensions:
        try:
            register(commands, env)
        except Exception as exc:
            print(f'dsh: warning: CLI extension "{name}" failed to register: {type(exc).__name__}: {exc}',
                  file=sys.stderr)
