"""The MCP example team runs: both members use the real glossary server's tools (``make mcp-demo``: ``dsh demo --profile``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from host_spec.host.store.jsonl import JsonlStore

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_team_uses_the_glossary_server(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "demo", str(data), "--profile",
                           "examples/mcp_profile.toml", "--script", "examples/mcp_demo.json", "--prompt", "go"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "(From the glossary MCP server.)" in (data / "workspace" / "docs" / "terms.md").read_text()
    store = JsonlStore(data)
    answers: dict[str, list[str]] = {}
    for session_id in store.list_ids():
        _, events = store.read(session_id)
        for event in events:
            value = event.value()
            if event.type == "tool/result" and value["name"].startswith("mcp__glossary__"):
                assert not value.get("is_error"), value
                answers.setdefault(session_id, []).extend(
                    block["text"] for block in json.loads(value["content"][0]["text"])["content"])
    assert sorted(len(texts) for texts in answers.values()) == [1, 2]  # the Lead once, the writer twice
    assert any("holder presumed dead can never write again" in text for texts in answers.values() for text in texts)
