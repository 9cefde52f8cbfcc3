"""A worker's default room: the formula over CPUs and memory, and the machine it is read from."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from host_spec.host.cli.worker import room_line
from host_spec.host.placement.capacity import (
    MEMBERS_PER_CPU, MEMORY_PER_MEMBER, Machine, default_max_members, machine,
)

GIB = 1024 ** 3


class TestTheFormula:
    @pytest.mark.parametrize(("cpus", "memory", "expected"), [
        (2, 8 * GIB, 8),  # CPU-bound: min(8, 32)
        (2, 1 * GIB, 4),  # a 1 GiB container: min(8, 4)
        (16, 64 * GIB, 64),  # min(64, 256)
        (1, 100 * 1024 ** 2, 1),  # less memory than one member takes: still one
        (0, 8 * GIB, 4),  # an affinity that reads empty counts as one CPU
    ])
    def test_the_smaller_of_the_cpu_and_memory_bounds_and_at_least_one(self, cpus: int, memory: int,
                                                                       expected: int) -> None:
        assert default_max_members(cpus, memory) == expected

    def test_the_constants_are_the_documented_ones(self) -> None:
        assert (MEMBERS_PER_CPU, MEMORY_PER_MEMBER) == (4, 256 * 1024 ** 2)


class TestTheMachine:
    def test_it_reads_this_processes_cpus_and_the_physical_memory(self, tmp_path: Path) -> None:
        here = machine(tmp_path / "no-cgroup")
        assert here.cpus == len(os.sched_getaffinity(0))
        assert here.memory == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")

    def test_a_lower_cgroup_limit_wins_and_max_means_none(self, tmp_path: Path) -> None:
        limit = tmp_path / "memory.max"
        limit.write_text(f"{GIB}\n")
        assert machine(limit).memory == GIB
        limit.write_text("max\n")
        assert machine(limit).memory == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


class TestTheWorkersLine:
    def test_it_says_how_many_members_and_where_the_number_came_from(self) -> None:
        assert room_line(8, Machine(2, 8 * GIB)) == "it holds up to 8 members at once (from 2 CPUs and 8.0 GiB of memory)"
        assert room_line(1, None) == "it holds up to 1 member at once (--max-members)"
        assert Machine(1, GIB // 2).describe() == "1 CPU and 0.5 GiB of memory"
