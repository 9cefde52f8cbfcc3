"""SIGKILL during compaction, then resume: the log stays valid and the compaction is redone or reused."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compaction_driver import PROMPT, WINDOW, model
from _agent_kit import echo_tool
from host_spec.events import ContextCompaction, EventType
from host_spec.host.app import Host
from host_spec.host.resume import RESUME_NOTICE
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text
from test_compaction import calls_answered, compactions, expected_context, surface

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("compaction_driver.py")


def kill_at(data: Path, point: str) -> None:
    done = subprocess.run([sys.executable, str(DRIVER), str(data), point], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr)


def stored(data: Path) -> list[Any]:
    """The lead's log as stored (decoding fails loudly on an invalid log)."""
    _, events = JsonlStore(data).read("lead")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return list(events)


async def resume(data: Path) -> tuple[Any, Any, Any]:
    adapter = model()
    host = await Host.open(data, None, adapter)
    host.tools.register(echo_tool())
    agent = await host.resume("lead")
    return host, agent, adapter


class TestKilledDuringCompaction:
    async def test_killed_inside_the_summary_call_redoes_it_on_resume(self, tmp_path: Path) -> None:
        """Nothing of a compaction is written before its summary arrives; the resumed turn compacts again."""
        data = tmp_path / "data"
        kill_at(data, "during-summary")
        events = stored(data)
        assert not [e for e in events if e.type == EventType.CONTEXT_COMPACTED]
        kinds = [e.type for e in events]
        assert kinds.count(EventType.TURN_START) == kinds.count(EventType.TURN_END) + 1  # killed mid-turn
        host, agent, adapter = await resume(data)
        try:
            found = compactions(agent.session)
            assert found, "the resumed run compacts again"
            event, record = found[0]
            index = next(i for i, r in enumerate(adapter.requests) if r.purpose == "compaction")
            after = list(adapter.requests[index + 1].messages)
            assert after == expected_context(agent.session, event, record)
            assert calls_answered(after) and message_text(after[0]["content"]) == PROMPT
            assert message_text(find_last(agent.session, EventType.ASSISTANT_MESSAGE)) == "all done"
        finally:
            await host.close()

    async def test_killed_after_the_record_reuses_it_on_resume(self, tmp_path: Path) -> None:
        """A durable compaction record survives the kill and is the resumed agent's context; it is not redone."""
        data = tmp_path / "data"
        kill_at(data, "after-record")
        events = stored(data)
        (kept,) = [e for e in events if e.type == EventType.CONTEXT_COMPACTED]
        record = kept.decode(ContextCompaction)
        host, agent, adapter = await resume(data)
        try:
            first = adapter.requests[0]
            assert first.purpose == "step"
            assert list(first.messages[:-1]) == expected_context(agent.session, kept, record) + [
                m for e, m in surface(agent.session.events, kept.seq, None) if e.seq < first_step_seq(agent, kept)]
            assert message_text(first.messages[-1]["content"]) == RESUME_NOTICE
            assert compactions(agent.session)[0][0].seq == kept.seq  # the stored one, reused
            assert message_text(find_last(agent.session, EventType.ASSISTANT_MESSAGE)) == "all done"
            assert WINDOW == record.window
        finally:
            await host.close()


def find_last(session: Any, kind: str) -> Any:
    return next(e.value()["content"] for e in reversed(session.events) if e.type == kind)


def first_step_seq(agent: Any, after: Any) -> int:
    """Seq of the resume notice (the first message the resumed run added)."""
    return next(e.seq for e in agent.session.events if e.seq > after.seq and e.type == EventType.USER_MESSAGE
                and message_text(e.value()["content"]) == RESUME_NOTICE)


class TestThroughTheCli:
    def test_a_profile_window_compacts_a_dsh_run(self, tmp_path: Path) -> None:
        """``[compaction.windows]`` in a profile reaches the run: the Lead's long session compacts, the
        transcript says so, and ``dsh team show --json`` counts it."""
        import json

        profile = tmp_path / "long.toml"
        profile.write_text('extends = "agent-teams"\n[compaction]\nthreshold = 0.8\n'
                           '[compaction.windows]\n"scripted:*" = 4000\n')
        creates = [{"tool_calls": [{"name": "team_task_create", "arguments": {
            "subject": f"[t{i}] part {i}", "description": "details " * 50}}]} for i in range(12)]
        script = tmp_path / "script.json"
        script.write_text(json.dumps({"lead": [*creates, {"text": "planned"}]}))
        data = tmp_path / "data"
        run = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "run", "--data-dir", str(data),
                              "--profile", str(profile), "--model", f"scripted:{script}", "[lead] plan the work"],
                             capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr
        assert "[lead] (context compacted: " in run.stdout and "[lead] assistant: planned" in run.stdout
        store = JsonlStore(data)
        (lead,) = store.list_ids()
        records = [e.decode(ContextCompaction) for e in store.read(lead)[1] if e.type == EventType.CONTEXT_COMPACTED]
        assert records and all(r.window == 4000 and r.estimated_tokens >= 3200 for r in records)
        show = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "team", "show", "--json",
                               "--data-dir", str(data)], capture_output=True, text=True, timeout=180)
        assert show.returncode == 0, show.stderr
        assert json.loads(show.stdout)["members"][0]["usage"]["compactions"] == len(records)
