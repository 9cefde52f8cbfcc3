"""The Team's checkpoints on the PostgreSQL store: saved at a clean stop, used by a cold resume, and by ``team show``."""

from __future__ import annotations

from typing import Any

import msgspec
import psycopg
import pytest
from kit_postgres import shared_server

from dsh_team.api import TeamServiceAPI
from dsh_team.checkpoint import NAME, decode_checkpoint, encode_checkpoint
from dsh_team.service import TeamService
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.postgres import PostgresStore


async def _open(url: str) -> Host:
    host = await Host.open(url, None, ScriptedModel.from_mapping({}))
    host.plugins.load("dsh-team", {"checkpoint_every": 0})
    host.plugins.load("dsh-team-invariant")
    return host


def _teams(host: Host) -> TeamService:
    found = host.service(TeamServiceAPI)
    assert isinstance(found, TeamService)
    return found


def _stored(url: str) -> tuple[int, bytes] | None:
    store = PostgresStore(url, lease_seconds=30, retry_seconds=5)
    try:
        return store.checkpoints.load("lead", NAME)
    finally:
        store.close()


async def test_a_team_on_postgres_resumes_from_its_checkpoint() -> None:
    url = shared_server().new_database()
    host = await _open(url)
    try:
        lead = host.start_agent(await host.create_session("lead"), name="lead")
        for index in range(2):
            await _teams(host).create_task(lead, subject=f"task {index}", description="on postgres")
        length = lead.session.last_seq
    finally:
        await host.close()
    found = _stored(url)
    assert found is not None and found[0] == length
    checkpoint = decode_checkpoint(found[1])
    altered = msgspec.structs.replace(checkpoint, team=msgspec.structs.replace(checkpoint.team, mode=False))
    store = PostgresStore(url, lease_seconds=30, retry_seconds=5)
    try:
        store.checkpoints.save("lead", NAME, checkpoint.seq, encode_checkpoint(altered))
    finally:
        store.close()
    host = await _open(url)
    try:
        resumed: Any = host.start_agent(await host.resume_session("lead"), name="lead", source="resume")
        state = _teams(host).journals.get(resumed.session).state
        assert state.mode is False  # started from the checkpoint
        assert [task.subject for task in state.tasks.listed()] == ["task 0", "task 1"]
    finally:
        await host.close()


def test_a_missing_table_or_a_held_lock_is_an_os_error_never_a_stall() -> None:
    """A checkpoint call that cannot be answered gives up (the reader then folds the whole log)."""
    url = shared_server().new_database()
    store = PostgresStore(url, lease_seconds=30, retry_seconds=5)
    try:
        assert not store.exists("lead")  # the store's own connection made the tables
        store.checkpoints.save("lead", NAME, 1, b"x")
        with psycopg.connect(url, autocommit=True) as holder:
            holder.execute("BEGIN")
            holder.execute("LOCK TABLE dsh_checkpoints IN ACCESS EXCLUSIVE MODE")  # a holder frozen mid-write
            with pytest.raises(OSError):
                store.checkpoints.load("lead", NAME)
            holder.execute("ROLLBACK")
        assert store.checkpoints.load("lead", NAME) == (1, b"x")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TABLE dsh_checkpoints")
        with pytest.raises(OSError, match="cannot be used"):
            store.checkpoints.load("lead", NAME)
    finally:
        store.close()
