"""Crash durability of the turn loop: a real subprocess killed with SIGKILL mid tool call."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from _agent_kit import find, make_kit
from host_spec.events import EventType
from host_spec.host.store.sessions import SessionStore
from host_spec.host.store.jsonl import JsonlStore

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    import msgspec
    from host_spec.host.agents.registry import AgentRegistry, AgentRuntime
    from host_spec.host.models.scripted import ScriptedModel
    from host_spec.host.agents.prompt import PromptRegistry
    from host_spec.host.store.sessions import SessionStore
    from host_spec.host.store.jsonl import JsonlStore
    from host_spec.host.agents.tools import ToolRegistry
    from host_spec.messages import user_message
    from host_spec.records import ToolSpec

    class NoArgs(msgspec.Struct):
        pass

    root, marker = Path(sys.argv[1]), Path(sys.argv[2])

    async def hang(args, call):
        marker.write_text("in tool body")
        await asyncio.Event().wait()

    async def main():
        tools = ToolRegistry()
        tools.register(ToolSpec("hang", "Hangs.", NoArgs, dict, hang))
        script = {"lead": [{"text": "working", "tool_calls": [{"name": "hang"}, {"name": "hang"}]}]}
        store = SessionStore(JsonlStore(root), None)
        registry = AgentRegistry(AgentRuntime(store, tools, PromptRegistry(), ScriptedModel.from_mapping(script)))
        agent = registry.create(store.create("crash-1"), name="lead")
        agent.followup(user_message("go", id="prompt-1"))
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


@pytest.mark.slow
class TestSigkillMidTool:
    async def test_checkpoint_and_closers_after_sigkill(self, tmp_path: Path) -> None:
        """The prompt and the started call are durable before the body runs; resume closes the turn."""
        marker = tmp_path / "marker"
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(marker)])
        try:
            deadline = time.monotonic() + 30
            while not marker.exists():
                assert child.poll() is None, "child exited early"
                assert time.monotonic() < deadline, "child never reached the tool body"
                time.sleep(0.02)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        assert child.returncode == -signal.SIGKILL

        _, on_disk = JsonlStore(tmp_path).read("crash-1")
        assert [e.type for e in on_disk][-3:] == ["user/message", "assistant/message", "tool/call"]
        assert on_disk[-1].value()["call_id"] == "lead-1.1"
        store = SessionStore(JsonlStore(tmp_path), None)
        session = store.resume("crash-1")
        kit = make_kit()
        agent = kit.registry.create(session, name="lead", source="resume")
        results = find(session, EventType.TOOL_RESULT)
        assert [(r["call_id"], r["error"]["code"]) for r in results] == [
            ("lead-1.1", "TOOL_OUTCOME_UNKNOWN"),
            ("lead-1.2", "TOOL_NOT_STARTED"),
        ]
        assert find(session, EventType.TURN_END) == [{"turn": 1, "reason": {"kind": "interrupted"}}]
        assert agent.status == "idle"  # the prompt was claimed: nothing left to resume
        await kit.registry.dispose(agent)
        await store.dispose(session)
        _, repaired = JsonlStore(tmp_path).read("crash-1")
        assert [e.type for e in repaired][-4:] == ["tool/result", "tool/result", "step/end", "turn/end"]
