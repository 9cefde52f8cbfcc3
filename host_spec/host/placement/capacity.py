"""How many members one worker holds by default: a worker's room, from its machine's CPUs and memory.

A member on a worker costs little CPU while it waits for its model and a share of
a core while its shell commands run; it costs memory for as long as it is held
(the Team's host with its tools and MCP servers, and the member's log read so
far). So the default is bounded by both, and the smaller bound wins::

    max_members = max(1, min(MEMBERS_PER_CPU * cpus, memory // MEMORY_PER_MEMBER))

with ``cpus`` the CPUs this process may run on (its affinity) and ``memory`` the
machine's physical memory, or the process's cgroup limit when that is lower (a
container). On a 2-CPU machine with 8 GiB that is ``min(8, 32) = 8``; a 1 GiB
container holds 4. ``dsh worker --max-members N`` overrides it.

The machine is read by :func:`machine`; :func:`default_max_members` is the pure
formula, so the formula is what tests check.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import attrs

__all__ = ["MEMBERS_PER_CPU", "MEMORY_PER_MEMBER", "Machine", "default_max_members", "machine"]

#: Members per CPU: most of a member's time on a worker is spent waiting for its model.
MEMBERS_PER_CPU: Final = 4
#: Memory one held member may take (its Team's host, tools and MCP servers, its log): 256 MiB.
MEMORY_PER_MEMBER: Final = 256 * 1024 * 1024
#: Where a cgroup (v2) limits this process's memory.
_CGROUP_MEMORY: Final = Path("/sys/fs/cgroup/memory.max")


@attrs.frozen
class Machine:
    """What a worker's room is computed from: its CPUs and memory (bytes)."""

    cpus: int
    memory: int

    def describe(self) -> str:
        """``2 CPUs and 7.8 GiB of memory``: for the worker's first line."""
        cpus = f"{self.cpus} CPU" + ("" if self.cpus == 1 else "s")
        return f"{cpus} and {self.memory / 1024 ** 3:.1f} GiB of memory"


def default_max_members(cpus: int, memory: int) -> int:
    """The formula of the module docstring: at least 1, else the smaller of the CPU and memory bounds."""
    return max(1, min(MEMBERS_PER_CPU * max(cpus, 1), memory // MEMORY_PER_MEMBER))


def machine(cgroup_memory: Path = _CGROUP_MEMORY) -> Machine:
    """This process's CPUs (its affinity) and memory (physical, or its cgroup's limit when lower)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity (macOS)
        cpus = os.cpu_count() or 1
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        limit = cgroup_memory.read_text().strip()
    except OSError:
        limit = "max"
    if limit.isdigit():
        memory = min(memory, int(limit))
    return Machine(cpus, memory)
