"""One process per Team, with real processes on one data directory.

A second ``dsh run`` gets its own session and never touches another run's
record; while a Lead is live, every session of its Team is refused to any other
process with ``SESSION_LOCKED``. The holder is a real subprocess that keeps its
sessions open until the test lets it go.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from host_spec.host.cli.run_settings import lookup
from host_spec.host.store.jsonl import JsonlStore

#: Holds session-1 of a data dir open (locked, not yet written) until stdin closes.
HOLD_ID = textwrap.dedent(
    """
    import sys
    from host_spec.events import SessionHeader
    from host_spec.host.store.jsonl import JsonlStore
    log = JsonlStore(sys.argv[1]).create(SessionHeader(id="session-1", created_at=1))
    print("ready", flush=True)
    sys.stdin.read()
    log.close()
    """
)

#: Keeps a Team live in its own process (a Lead and its teammate asleep on disk).
HOLD_TEAM = Path(__file__).resolve().parents[1] / "hold_team.py"


def dsh(*args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "DSH_DATA_DIR"}
    return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def holder(code: str | Path, data: Path) -> tuple[subprocess.Popen[str], list[str]]:
    argv = [sys.executable, str(code)] if isinstance(code, Path) else [sys.executable, "-c", code]
    process = subprocess.Popen([*argv, str(data)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert process.stdout is not None
    for raw in process.stdout:  # unconfigured structlog writes to stdout too
        if raw.startswith("ready"):
            return process, raw.split()[1:]
    raise AssertionError(f"holder exited with {process.wait()}")


def script(tmp_path: Path, marker: str) -> Path:
    path = tmp_path / f"{marker}.json"
    path.write_text(json.dumps({"lead": [{"text": marker}]}))
    return path


def session_of(result: subprocess.CompletedProcess[str]) -> str:
    line = next(line for line in result.stderr.splitlines() if line.startswith("dsh: session "))
    return line.removeprefix("dsh: session ")


class TestSecondRun:
    def test_a_run_whose_fresh_id_is_held_elsewhere_takes_the_next_and_leaves_that_record_alone(
        self, tmp_path: Path
    ) -> None:
        """Another process holds session-1 (not yet on disk): this run becomes session-2, its own record only."""
        data = tmp_path / "data"
        data.mkdir()
        process, _ = holder(HOLD_ID, data)
        try:
            mine = script(tmp_path, "mine")
            result = dsh("run", "--data-dir", str(data), "--profile", "headless", "--model", f"scripted:{mine}", "go")
            assert result.returncode == 0, result.stderr
            assert session_of(result) == "session-2"
            assert not (data / "runs" / "session-1.json").exists()  # never touched another run's record
            recorded = lookup(data, "session-2")
            assert recorded is not None and recorded.model == f"scripted:{mine}"
            assert sorted(p.name for p in (data / "runs").iterdir()) == ["session-2.json"]  # no temp left
        finally:
            process.communicate("", timeout=60)

    def test_concurrent_runs_each_get_their_own_session_and_record(self, tmp_path: Path) -> None:
        """Four ``dsh run`` started together: four sessions, each record names the script that session ran."""
        data = tmp_path / "data"
        data.mkdir()
        env = {key: value for key, value in os.environ.items() if key != "DSH_DATA_DIR"}
        scripts = [script(tmp_path, f"marker-{n}") for n in range(4)]
        runs = [subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "run", "--data-dir", str(data),
                                  "--profile", "headless", "--model", f"scripted:{path}", "go"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for path in scripts]  # fmt: skip
        sessions = []
        for process, path in zip(runs, scripts, strict=True):
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            session = session_of(subprocess.CompletedProcess([], 0, out, err))
            sessions.append(session)
            recorded = lookup(data, session)
            assert recorded is not None and recorded.model == f"scripted:{path}"
            _, events = JsonlStore(data).read(session)
            texts = [b["text"] for e in events if e.type == "assistant/message" for b in e.value()["content"]]
            assert texts == [path.stem]  # the session ran the script its record names
        assert len(set(sessions)) == 4


class TestOneProcessPerTeam:
    def test_every_session_of_a_live_team_is_refused_to_another_process(self, tmp_path: Path) -> None:
        """While the Lead's process lives, ``dsh resume`` of its teammate or of the Lead is SESSION_LOCKED."""
        data = tmp_path / "data"
        process, sessions = holder(HOLD_TEAM, data)
        lead = "lead"
        (teammate,) = [sid for sid in sessions if sid != lead]
        try:
            before = JsonlStore(data).path(teammate).read_bytes()
            for target in (teammate, lead):
                result = dsh("resume", "--data-dir", str(data), "--profile", "agent-teams", target)
                assert result.returncode == 2 and "dsh: SESSION_LOCKED: " in result.stderr, result.stderr
                assert "one process per Team" in result.stderr
            assert JsonlStore(data).path(teammate).read_bytes() == before
        finally:
            process.communicate("", timeout=60)
        result = dsh("resume", "--data-dir", str(data), "--profile", "agent-teams", teammate)
        assert result.returncode == 0, result.stderr  # released with its process
