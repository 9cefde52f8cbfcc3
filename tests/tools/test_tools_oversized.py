"""An oversized Team tool call is refused before its payload is stored (real host, real JSONL log)."""

from __future__ import annotations

from pathlib import Path

from host_spec.events import EventType
from host_spec.messages import user_message
from team_tools_host import open_host, start_root


async def test_an_oversized_message_is_refused_and_only_a_preview_with_its_size_is_stored(tmp_path: Path) -> None:
    """A 200 kB send_message: ``ARGUMENTS_TOO_LARGE``, and the log never holds the payload (not even once)."""
    payload = "x" * 200_000
    call = {"name": "send_message", "arguments": {"target": "lead", "message": payload}}
    script = {"lead": [{"tool_calls": [call]}, {"text": "done"}]}
    async with open_host(tmp_path, script, profile="agent-teams") as host:
        lead = await start_root(host)
        lead.followup(user_message("go"))
        await lead.when_idle()
        events = list(lead.session.events)
        (record,) = [e.value() for e in events if e.type == EventType.TOOL_CALL]
        (result,) = [e.value() for e in events if e.type == EventType.TOOL_RESULT]
        assert result["error"]["code"] == "ARGUMENTS_TOO_LARGE"
        assert "200030 bytes; the limit is 65536" in result["error"]["message"]
        assert len(record["arguments"]) < 400 and '"bytes":200030' in record["arguments"]
        stored = [b for e in events if e.type == EventType.ASSISTANT_MESSAGE for b in e.value()["content"]]
        assert [b["arguments"] for b in stored if b["type"] == "tool-call"] == [record["arguments"]]
        assert not [e for e in events if e.type.startswith("team/message")]
    logs = list((tmp_path).rglob("*.jsonl"))
    assert logs and all(b"x" * 1000 not in path.read_bytes() for path in logs)
