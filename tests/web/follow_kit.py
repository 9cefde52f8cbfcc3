"""Processes for the followed-panel tests: a Team live on a shared store, and ``dsh team serve --store``.

Both are real subprocesses against a real PostgreSQL server; the test process only
talks to them (stdin commands, HTTP, the event stream), as a user on another
machine would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx2

HERE = Path(__file__).resolve().parent
WAIT_S = 60.0


class StoreTeam:
    """``tests/web/store_team.py``: the kit's Team held live in its own process on ``url``."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "store_team.py"), url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline().split()
        assert ready and ready[0] == "ready", ready
        self.lead_id, self.holder = ready[1], ready[2]

    def command(self, line: str) -> int:
        """Run one command in the Team's process; returns the Lead log's length once the Team is quiet."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        done = self.proc.stdout.readline().split()
        assert done and done[0] == "done", done
        return int(done[1])

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        assert self.proc.wait(WAIT_S) == 0


class Serve:
    """``dsh team serve --store URL``: the panel in its own process; :attr:`url` is the page's address."""

    def __init__(self, store_url: str) -> None:
        env = {key: value for key, value in os.environ.items() if key not in ("DSH_DATA_DIR", "DSH_STORE")}
        self.proc = subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "team", "serve", "--store",
                                      store_url], stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
        assert self.proc.stderr is not None
        self.line = self.proc.stderr.readline()
        assert "(read-only, following the store): http://127.0.0.1:" in self.line, self.line
        self.url = self.line.split()[-1]
        self.base, self.token = self.url.split("/?token=")

    def api(self, path: str) -> str:
        return f"{self.base}{path}?token={self.token}"

    def post(self, path: str, body: dict[str, Any]) -> httpx2.Response:
        return httpx2.post(self.api(path), json=body, headers={"Origin": self.base}, timeout=WAIT_S)

    def close(self) -> str:
        import signal

        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(WAIT_S) == 130
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


class EventLog:
    """The panel's event stream read on a thread: ``(kind, id, data)`` in arrival order."""

    def __init__(self, serve: Serve) -> None:
        self.messages: list[tuple[str, int, dict[str, Any]]] = []
        self._changed = threading.Condition()
        self._client = httpx2.Client(timeout=httpx2.Timeout(WAIT_S, read=None))
        self._thread = threading.Thread(target=self._read, args=(serve.api("/api/events"),), daemon=True)
        self._thread.start()

    def _read(self, url: str) -> None:
        kind, ident = "", 0
        try:
            with self._client.stream("GET", url) as response:
                for line in response.iter_lines():
                    if line.startswith("event:"):
                        kind = line.split(":", 1)[1].strip()
                    elif line.startswith("id:"):
                        ident = int(line.split(":", 1)[1])
                    elif line.startswith("data:"):
                        with self._changed:
                            self.messages.append((kind, ident, json.loads(line.split(":", 1)[1])))
                            self._changed.notify_all()
        except httpx2.HTTPError:
            pass  # the server stopped

    def until(self, at: int) -> list[tuple[str, int, dict[str, Any]]]:
        """The messages once one carries Lead log position ``at`` (or later)."""
        with self._changed:
            assert self._changed.wait_for(lambda: any(ident >= at for _, ident, _ in self.messages), WAIT_S), (
                f"no message at {at}: {[(k, i) for k, i, _ in self.messages]}")
            return list(self.messages)

    def close(self) -> None:
        self._client.close()
