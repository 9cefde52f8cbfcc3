"""Keep a Team live in its own process: ``python tests/hold_team.py DATA_DIR``.

Runs a Lead that spawns one teammate (which then sleeps on disk), prints
``ready <every stored session id>`` and keeps the host open until stdin closes.
Tests use it as "another process owns this Team".
"""

from __future__ import annotations

import asyncio
import sys

from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore

SCRIPT = {
    "lead": [
        {"tool_calls": [{"name": "spawn_teammate", "arguments": {"name": "worker", "description": "w", "prompt": "work"}}]},
        {"text": "spawned"},
    ],
    "worker": [{"text": "worked"}],
}


async def main(data_dir: str) -> None:
    host = await Host.open(data_dir, "agent-teams", ScriptedModel.from_mapping(SCRIPT))
    await host.run("go", session_id="lead")
    print("ready", " ".join(JsonlStore(data_dir).list_ids()), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await host.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
