"""The shared-store part of the reliability suite, bounded: takeover, fencing and an outage on a real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kit_postgres import PostgresServer

from crash_sweep import Demo, spread
from shared_store import SharedStoreDemo, fenced_stale_processes, outages, takeovers
from shared_outages import outage_takeovers
from shared_workers import member_takeovers, worker_takeovers

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedStoreDemo]:
    server = PostgresServer()  # its own server: the outage case stops it
    server.start()
    try:
        yield SharedStoreDemo(Demo(tmp_path_factory.mktemp("shared-store")), server)
    finally:
        server.destroy()


@pytest.mark.timeout_s(300)
def test_a_killed_lead_process_is_taken_over_by_another(shared: SharedStoreDemo) -> None:
    total, board = shared.clean()
    assert len(board) == 2 and {task["status"] for task in board} == {"completed"}
    figures = takeovers(shared, spread(total, 3)[1:])  # two points: the middle and the last write
    assert figures.attempted == 2 and figures.violations == [] and figures.passed == 2


def test_a_frozen_process_whose_team_was_taken_over_is_fenced(shared: SharedStoreDemo) -> None:
    figures = fenced_stale_processes(shared, [60])
    assert figures.attempted == 1 and figures.violations == []


def test_a_database_outage_mid_run_loses_nothing(shared: SharedStoreDemo) -> None:
    figures = outages(shared, [60])
    assert figures.attempted == 1 and figures.violations == []


@pytest.mark.timeout_s(300)
def test_two_workers_take_a_team_over_twice(shared: SharedStoreDemo) -> None:
    """Three processes: the Lead dies, a worker takes over and dies mid-run, the other worker finishes."""
    total, _ = shared.clean()
    figures, kills = worker_takeovers(shared, [max(2, total // 4)])
    assert figures.attempted == 1 and figures.violations == [] and kills == 1


@pytest.mark.timeout_s(300)
def test_a_worker_killed_while_running_a_member_is_replaced(shared: SharedStoreDemo) -> None:
    """Three processes: a Lead and two workers running its members; one worker dies mid-run; the Team finishes."""
    figures, kills = member_takeovers(shared, [6, 14])
    assert figures.attempted == 2 and figures.violations == [] and kills == 2


@pytest.mark.timeout_s(300)
def test_outages_shorter_and_longer_than_the_lease_with_a_takeover_record_nothing_twice(shared: SharedStoreDemo) -> None:
    """A Lead and two workers running its members; the server stopped shorter than the lease, then longer
    with the Lead frozen until a worker took its Team over: no call or effect twice, nothing left open."""
    figures = outage_takeovers(shared, [3], kinds=("short", "takeover"))
    assert figures.attempted == 2 and figures.violations == [] and figures.passed == 2
