"""Memory and process-count limits of one sandboxed command.

Two mechanisms, because one does not cover every user:

* **rlimits inside the sandbox.** The command starts under ``ulimit -u N -d KB``
  (soft and hard, so it cannot raise them again; never above the host's own hard
  limits). ``RLIMIT_DATA`` bounds each process's heap and private writable memory. ``RLIMIT_NPROC`` counts the processes of a user *in
  its user namespace*, and bubblewrap gives an unprivileged user a fresh one per
  command, so the limit is the command's own -- it neither counts nor starves the
  user's other processes.
* **a pids cgroup, for root.** The kernel never enforces ``RLIMIT_NPROC`` on the
  initial root user (or on a process with ``CAP_SYS_RESOURCE``), whatever the
  namespaces. When the host runs as root each command therefore gets a child
  cgroup of the host's own pids cgroup with ``pids.max``; a small ``sh`` enters it
  before it execs bubblewrap, so nothing of the command ever runs outside it. No
  writable pids cgroup as root: the limit cannot be enforced and the run fails at
  start (``SANDBOX_UNAVAILABLE``), unless the profile sets ``max_processes = 0``.

Wall time is the caller's (the ``bash`` timeout kills the whole sandbox).
"""

from __future__ import annotations

import atexit
import itertools
import os
import resource
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import attrs

__all__ = ["ulimit_prefix", "limited", "PidsCgroups", "CommandGroup", "find_pids_cgroups"]

#: A dir of our cgroups per host process, so two hosts on one machine never clash.
_PREFIX: Final = "dsh-sandbox-"
_names = itertools.count(1)


def _within_hard(resource_id: int, wanted: int) -> int:
    """``wanted``, or the host's own hard limit when that is lower (an ordinary user cannot raise it)."""
    hard = resource.getrlimit(resource_id)[1]
    return wanted if hard == resource.RLIM_INFINITY or hard >= wanted else int(hard)


def ulimit_prefix(memory_mb: int, max_processes: int) -> str:
    """The ``ulimit`` line that starts the sandboxed shell ("" when there is no limit).

    Memory is ``RLIMIT_DATA`` (``-d``, the heap and private writable mappings), not
    the address space: runtimes that reserve large address ranges up front (V8, the
    JVM) start fine and are limited by what they actually use.
    """
    parts = []
    if max_processes:
        parts.append(f"-u {_within_hard(resource.RLIMIT_NPROC, max_processes)}")
    if memory_mb:
        kib = _within_hard(resource.RLIMIT_DATA, memory_mb * 1024 * 1024) // 1024
        parts.append(f"-d {kib}")
    return f"ulimit -S -H {' '.join(parts)} || exit 125; " if parts else ""


def limited(argv: Sequence[str], memory_mb: int, max_processes: int) -> list[str]:
    """``argv`` with the rlimits applied first.

    A ``/bin/bash -c COMMAND`` line gets them on the command's own first line (no
    second shell: a process start is a good part of a trivial command's cost);
    any other program is started by a shell that sets them and execs it.
    """
    prefix = ulimit_prefix(memory_mb, max_processes)
    if not prefix:
        return list(argv)
    if len(argv) == 3 and argv[0] == "/bin/bash" and argv[1] == "-c":
        return ["/bin/bash", "-c", prefix + argv[2]]
    return ["/bin/bash", "-c", prefix + 'exec "$@"', "dsh-sandbox", *argv]


def _own_pids_dir() -> Path | None:
    """The host process's own pids cgroup directory (v1 ``pids`` or a v2 tree with ``pids``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    own: dict[str, str] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") or [""]:
            own[controller] = path
    for mount in mounts:
        left, _, right = mount.partition(" - ")
        fields, extra = left.split(), right.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        point, fstype, options = fields[4], extra[0], extra[2]
        if fstype == "cgroup" and "pids" in options.split(",") and "pids" in own:
            return Path(point) / own["pids"].lstrip("/")
        if fstype == "cgroup2" and "" in own:
            base = Path(point) / own[""].lstrip("/")
            try:
                if "pids" in (base / "cgroup.controllers").read_text().split():
                    return base
            except OSError:
                continue
    return None


@attrs.define(eq=False)
class CommandGroup:
    """One command's cgroup: ``wrap`` its argv, ``release`` it after the command ended."""

    path: Path
    pool: PidsCgroups | None = None

    def wrap(self, argv: Sequence[str]) -> list[str]:
        script = f"echo $$ > {shlex.quote(str(self.path / 'cgroup.procs'))} || exit 125; exec \"$@\""
        return ["/bin/sh", "-c", script, "dsh-sandbox", *argv]

    async def release(self) -> None:
        """Give the cgroup back; the next command takes it only once it is empty (:meth:`PidsCgroups.group`)."""
        if self.pool is not None:
            self.pool.returned.append(self.path)


@attrs.define(eq=False)
class PidsCgroups:
    """The host process's directory of per-command pids cgroups.

    Empty groups are reused: creating and removing a cgroup costs more than the
    sandbox itself (``rmdir`` waits for the kernel's RCU grace period).
    """

    base: Path
    returned: list[Path] = attrs.Factory(list)

    def _empty(self) -> Path | None:
        """A returned group whose last process is gone (the killed sandbox's may take a moment)."""
        for index, path in enumerate(self.returned):
            try:
                empty = (path / "pids.current").read_text().strip() == "0"
            except OSError:
                empty = False
            if empty:
                return self.returned.pop(index)
        return None

    def group(self, max_processes: int) -> CommandGroup:
        path = self._empty()
        if path is None:
            path = self.base / f"c{next(_names)}"
            path.mkdir()
        try:
            (path / "pids.max").write_text(f"{max_processes}\n")
        except OSError:
            path.rmdir()
            raise
        return CommandGroup(path, self)


def find_pids_cgroups() -> PidsCgroups | None:
    """A writable pids cgroup directory for this process's commands, or ``None`` where there is none."""
    own = _own_pids_dir()
    if own is None:
        return None
    _sweep(own)
    base = own / f"{_PREFIX}{os.getpid()}"
    try:
        base.mkdir(exist_ok=True)
        PidsCgroups(base).group(1).path.rmdir()
    except OSError:
        return None
    atexit.register(_remove, base)
    return PidsCgroups(base)


def _remove(base: Path) -> None:
    """Remove a per-process directory and the (empty) command groups left in it."""
    try:
        for child in base.iterdir():
            if child.is_dir():
                child.rmdir()
        base.rmdir()
    except OSError:
        pass


def _sweep(own: Path) -> None:
    """Remove the directories of host processes that are gone (a crash skips ``atexit``)."""
    try:
        entries = [entry for entry in own.iterdir() if entry.name.startswith(_PREFIX)]
    except OSError:
        return
    for entry in entries:
        pid = entry.name.removeprefix(_PREFIX)
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _remove(entry)
