"""Shared helpers of the MCP tests: profiles naming the real test server, and a real HTTP server process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("mcp_test_server.py")
START_TIMEOUT_S = 30.0


def stdio(*extra: str, **options: Any) -> dict[str, Any]:
    """The table of a stdio server running the test server with this interpreter."""
    return {"command": sys.executable, "args": [str(SERVER), *extra], **options}


def _value(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def profile(tmp: Path, servers: Mapping[str, Mapping[str, Any]], *, extends: str | None = None) -> Path:
    """A profile file with ``[mcp.servers.NAME]`` tables (and nothing else unless ``extends``)."""
    lines = [f"extends = {json.dumps(extends)}"] if extends else []
    for name, table in servers.items():
        lines.append(f"[mcp.servers.{name}]")
        lines.extend(f"{key} = {_value(value)}" for key, value in table.items())
    path = tmp / "profile.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_server(transport: str = "http") -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The test server over streamable HTTP (or ``sse``) on 127.0.0.1, a free port: ``(url, process)``."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), f"--{transport}", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, "the HTTP test server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP test server never listened"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/{'mcp' if transport == 'http' else 'sse'}", process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def wait_for_pid(marker: Path, timeout: float = START_TIMEOUT_S) -> int:
    """The process id a ``block`` call wrote to ``marker``."""
    deadline = time.monotonic() + timeout
    while not (marker.exists() and marker.read_text().strip()):
        assert time.monotonic() < deadline, "the blocking call never started"
        time.sleep(0.02)
    return int(marker.read_text())


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def gone(pid: int, timeout: float = 15.0) -> bool:
    """Whether process ``pid`` is gone within ``timeout`` seconds (a zombie of ours counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie of ours counts as gone
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        with contextlib.suppress(OSError):  # so does anyone's zombie (an init that does not reap)
            if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
                return True
        time.sleep(0.05)
    return False


def results(agent: Any) -> list[dict[str, Any]]:
    """The ``tool/result`` values of ``agent``'s log, in order."""
    return [event.value() for event in agent.session.events if event.type == "tool/result"]


def text_of(result: Mapping[str, Any]) -> Any:
    """A successful result's JSON value."""
    return json.loads(result["content"][0]["text"])
