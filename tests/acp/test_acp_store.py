"""``dsh acp --store URL``: an editor's run on a shared PostgreSQL store (a real server), loaded by a new agent.

The run's settings go to the store's run record (not a data directory), so the
second agent loads the session with no ``--model`` and continues it; the Lead's
log in the store is the oracle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kit_acp import Editor, agent, initialized, prompt
from kit_postgres import shared_server

from host_spec.events import EventType
from host_spec.host.store.postgres import PostgresStore
from host_spec.messages import message_text

pytestmark = pytest.mark.slow


@pytest.mark.timeout_s(120)
async def test_a_run_on_the_shared_store_is_loaded_by_another_agent(tmp_path: Path) -> None:
    url = shared_server().new_database()
    data, workspace = tmp_path / "data", tmp_path / "workspace"
    workspace.mkdir()
    script = tmp_path / "lead.json"
    script.write_text(json.dumps({"lead": [{"text": "First answer."}, {"text": "Second answer."}]}))
    async with agent(Editor(), data, "--store", url, "--model", f"scripted:{script}",
                     log=tmp_path / "agent.log") as (conn, _):
        await initialized(conn)
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert (await prompt(conn, session.session_id, "one")).stop_reason == "end_turn"
    loaded = Editor()
    async with agent(loaded, data, "--store", url, log=tmp_path / "agent.log") as (conn, _):
        await initialized(conn)
        await conn.load_session(cwd=str(workspace), session_id=session.session_id, mcp_servers=[])
        assert "First answer." in loaded.message_text()
        assert (await prompt(conn, session.session_id, "two")).stop_reason == "end_turn"
        assert loaded.message_text().endswith("Second answer.\n\n")
    assert not data.exists()  # nothing went to a data directory
    store = PostgresStore(url)
    try:
        _, events = store.read(session.session_id)
    finally:
        store.close()
    texts = [message_text(e.value()["content"]) for e in events if e.type == EventType.ASSISTANT_MESSAGE]
    assert texts == ["First answer.", "Second answer."]
