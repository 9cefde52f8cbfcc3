"""A real PostgreSQL server in a temporary directory, for tests and benchmarks.

The PostgreSQL backend is tested against a real server, never a mock: this kit
runs Debian's ``postgresql`` binaries (``initdb``, ``pg_ctl``) on a fresh data
directory that listens only on a unix socket inside that directory, so several
suites on one machine never clash on a port. ``initdb`` refuses to run as root;
as root the kit hands the directory to the ``postgres`` system user and runs the
binaries through ``runuser``.

A missing server is a failure with the one command that fixes it, never a skip:
:func:`postgres_bindir` raises :class:`PostgresUnavailable` and tests let it
fail. Benchmarks catch it and print the reason instead.

:func:`shared_server` is the one server of a test process (started on first
use, stopped at exit); every test takes a fresh database from it
(:meth:`PostgresServer.new_database`), which costs a ``CREATE DATABASE``, not a
server start.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PostgresServer", "PostgresUnavailable", "postgres_bindir", "shared_server"]

INSTALL_HINT = "apt-get install -y postgresql"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine (or the server would not start)."""


def postgres_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``.

    Raises:
        PostgresUnavailable: none found; the message names the install command.
    """
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)
    for candidate in reversed(candidates):
        if os.access(os.path.join(candidate, "initdb"), os.X_OK):
            return Path(candidate)
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if found and os.access(os.path.join(found, "initdb"), os.X_OK):
            return Path(found)
    on_path = shutil.which("initdb")
    if on_path is not None:
        return Path(on_path).parent
    raise PostgresUnavailable(f"no PostgreSQL server binaries (initdb, pg_ctl) found; run: {INSTALL_HINT}")


class PostgresServer:
    """One PostgreSQL server on a unix socket in a temporary directory.

    Args:
        durable: Keep ``fsync`` on (benchmarks measure the durable path). Tests turn
            it off, which only matters if the machine itself crashes; commits stay
            synchronous, so a server stopped with ``immediate`` (a crash) loses nothing acknowledged.
    """

    def __init__(self, *, durable: bool = False, settings: dict[str, str] | None = None) -> None:
        self.bindir = postgres_bindir()
        self.durable = durable
        self.settings = dict(settings or {})  # server settings over the kit's (``max_connections``, ...)
        self.directory = Path(tempfile.mkdtemp(prefix="dsh-pg-"))
        self.data = self.directory / "data"
        self.socket_dir = self.directory
        self.logfile = self.directory / "server.log"
        self._as_postgres = os.geteuid() == 0
        self._names = itertools.count(1)
        self.running = False
        if self._as_postgres:
            shutil.chown(self.directory, "postgres", "postgres")
            os.chmod(self.directory, 0o755)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self.logfile.read_text(errors="replace")[-2000:] if self.logfile.exists() else ""
            raise PostgresUnavailable(f"{tool} failed ({done.returncode}): {done.stderr.strip()}\n{log}")

    def start(self) -> None:
        """Start (or restart after :meth:`stop`) the server; returns once it accepts connections."""
        settings = [
            "-k", str(self.socket_dir), "-c", "listen_addresses=", "-c", "max_connections=200",
            "-c", "shared_buffers=32MB", "-c", f"fsync={'on' if self.durable else 'off'}",
            "-c", f"full_page_writes={'on' if self.durable else 'off'}",
            *(item for name, value in self.settings.items() for item in ("-c", f"{name}={value}")),
        ]
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.logfile), "-w", "-t", "60", "-o",
                  " ".join(f"'{item}'" if item.endswith("=") else item for item in settings), "start")
        self.running = True

    def begin_shutdown(self) -> None:
        """Ask for a smart shutdown and return at once: the server refuses new connections
        (``the database system is shutting down``) and stops once its last client leaves."""
        if self.running:
            self._run("pg_ctl", "-D", str(self.data), "-m", "smart", "-W", "stop")
            self.running = False

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate``: as a crash would; every connection is cut)."""
        if self.running:
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")
            self.running = False

    def url(self, database: str = "postgres") -> str:
        """A libpq URL of ``database`` on this server's socket."""
        return f"postgresql:///{database}?host={self.socket_dir}&user=postgres"

    def password_role(self, name: str, password: str, database: str = "postgres") -> str:
        """Create a login role that must give ``password`` (scram) and return its URL, password included.

        Every other role keeps the trust the kit starts with: one ``pg_hba.conf``
        line for this role goes first, and the server reloads it.
        """
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE \"{name}\" LOGIN PASSWORD '{password}'")
            hba = self.data / "pg_hba.conf"
            hba.write_text(f"local all {name} scram-sha-256\n" + hba.read_text())
            conn.execute("SELECT pg_reload_conf()")
        return f"postgresql://{name}:{password}@/{database}?host={self.socket_dir}"

    def new_database(self) -> str:
        """Create an empty database and return its URL (one per test keeps tests apart)."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        """Stop the server and delete its directory."""
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


_shared: PostgresServer | None = None


def shared_server() -> PostgresServer:
    """The test process's one server, started on first use and destroyed at exit.

    Raises:
        PostgresUnavailable: no server binaries (the message says what to install).
    """
    global _shared
    if _shared is None:
        server = PostgresServer()
        server.start()
        atexit.register(server.destroy)
        _shared = server
    elif not _shared.running:
        _shared.start()
    return _shared


def own_server() -> Iterator[PostgresServer]:
    """A server of one test module's own, for tests that stop and restart it (the shared one stays up).

    Wrap it as that module's fixture: ``server = pytest.fixture(scope="module", name="server")(own_server)``.
    """
    server = PostgresServer()
    server.start()
    yield server
    server.destroy()


def running_database(server: PostgresServer) -> str:
    """The URL of a new database on ``server``, started again first if a test left it stopped."""
    if not server.running:
        server.start()
    return server.new_database()
