"""Members of one Team on several ``dsh worker`` processes, through a real PostgreSQL server.

Real subprocesses: a Lead process (``dsh run --store``) and worker processes
(``dsh worker --store``), killed with SIGKILL or frozen with SIGSTOP where the
test says so. The oracles: the same demo on the embedded JSONL store (the board,
task by task, and the files the team wrote), the work desk's table (who ran
what), and the Lead's log (each message delivered once).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kit_postgres import shared_server

from host_spec.host.store.postgres import PostgresStore

from test_cli_store import board, dsh, run_demo

LEASE = "2"
#: A Lead that puts one task on the board and spawns a member whose second call is a long shell command.
SLOW_TEAM: dict[str, Any] = {
    "lead": [
        {"text": "One task.", "tool_calls": [{"name": "team_task_create", "arguments": {
            "subject": "Slow work", "description": "Run the slow command, then complete."}}]},
        {"text": "A runner takes it.", "tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "runner", "description": "Runs the slow command", "context": "fresh",
            "prompt": "Claim task-1, run the slow command, complete task-1 and tell the Lead."}}]},
        {"when": "runner finished", "text": "The runner reported; done."},
    ],
    "runner": [
        {"text": "Claiming.", "tool_calls": [{"name": "team_task_update", "arguments": {
            "task_id": "task-1", "expected_revision": 1, "action": "claim"}}]},
        {"text": "Running it.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo started > ran.txt; sleep 60"}}]},
        {"text": "Completing.", "tool_calls": [{"name": "team_task_update", "arguments": {
            "task_id": "task-1", "expected_revision": 2, "action": "complete"}}]},
        {"text": "Reporting.", "tool_calls": [{"name": "send_message", "arguments": {
            "target": "lead", "message": "runner finished: task-1 complete"}}]},
        {"text": "Done."},
    ],
}


def _env(lease: str = LEASE) -> dict[str, str]:
    variables = {key: value for key, value in os.environ.items() if key not in ("DSH_DATA_DIR", "DSH_STORE")}
    variables["DSH_LEASE_SECONDS"] = lease
    return variables


class Workers:
    """Worker processes of one test, each with its stderr in a file; all stopped at the end."""

    def __init__(self, url: str, cwd: Path, lease: str = LEASE) -> None:
        self.url, self.cwd, self.lease = url, cwd, lease
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *options: str) -> subprocess.Popen[str]:
        err = open(self.cwd / f"worker-{len(self.procs)}.err", "w")
        proc = subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "worker", "--store", self.url,
                                 "--linger", "3", *options], cwd=self.cwd, env=_env(self.lease), text=True,
                                stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
        self.procs.append(proc)
        return proc

    def stderr(self, index: int) -> str:
        return (self.cwd / f"worker-{index}.err").read_text()

    def wait_present(self, count: int) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.url) as conn:
                    row = conn.execute("SELECT count(*) FROM dsh_leases WHERE key LIKE 'worker:%' "
                                       "AND holder IS NOT NULL AND expires_at > now()").fetchone()
            except psycopg.errors.UndefinedTable:
                row = None  # no worker has created the tables yet
            if row and row[0] >= count:
                return
            time.sleep(0.1)
        raise AssertionError(f"{count} workers did not come up")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    url = shared_server().new_database()
    pool = Workers(url, tmp_path)
    yield pool
    pool.stop()


def work_rows(url: str) -> list[tuple[str, str, str, str | None]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT member, kind, state, holder FROM dsh_work ORDER BY n").fetchall()


def worker_holder(url: str) -> str:
    """The holder name of the one live worker (its presence lease)."""
    with psycopg.connect(url) as conn:
        (holder,) = conn.execute("SELECT holder FROM dsh_leases WHERE key LIKE 'worker:%' AND holder IS NOT NULL "
                                 "AND expires_at > now()").fetchone()
    return str(holder)


def bash_error(url: str) -> str | None:
    """The error code of the runner's ``bash`` result, read from the runner's log in the store."""
    store = PostgresStore(url)
    try:
        (member,) = [session for session in store.list_ids() if session != "session-1"]
        results = [e.value() for e in store.read(member)[1] if e.type == "tool/result"]
    finally:
        store.close()
    (bash,) = [result for result in results if result["name"] == "bash"]
    return (bash.get("error") or {}).get("code")


def start_lead(url: str, cwd: Path, script: Path, workspace: Path, lease: str = LEASE) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "run", "--store", url, "--profile",
                             "agent-teams", "--model", f"scripted:{script}", "--workspace", str(workspace), "go"],
                            cwd=cwd, env=_env(lease), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def run_until_the_command_runs(workers: Workers, tmp_path: Path, team: dict[str, Any], *,
                               lease: str = LEASE) -> tuple[Path, subprocess.Popen[str]]:
    """Start a Lead running ``team`` once a worker is present; return when the runner's command has started."""
    script = tmp_path / "team.json"
    script.write_text(json.dumps(team))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    workers.wait_present(1)
    lead = start_lead(workers.url, tmp_path, script, workspace, lease=lease)
    deadline = time.monotonic() + 60
    while not (workspace / "ran.txt").exists():  # the shell command runs on a worker
        if time.monotonic() > deadline or lead.poll() is not None:
            lead.kill()
            raise AssertionError(f"the command never started: {lead.communicate()[1][-500:]}")
        time.sleep(0.05)
    return workspace, lead


class TestTheDemoOnTwoWorkers:
    def test_the_lead_and_two_workers_complete_the_demo_as_one_process_does(self, workers: Workers, tmp_path: Path) -> None:
        workers.start("--max-members", "1")  # one member each: the two teammates land on different workers
        workers.start("--max-members", "1")
        workers.wait_present(2)
        placed = run_demo(tmp_path, "placed", "--store", workers.url, env={"DSH_LEASE_SECONDS": LEASE})
        assert placed.returncode == 0, placed.stderr
        embedded = run_demo(tmp_path, "embedded", "--data-dir", str(tmp_path / "data"))
        assert embedded.returncode == 0, embedded.stderr
        show = dsh("team", "show", "--store", workers.url, "--json", cwd=tmp_path)
        reference = dsh("team", "show", "--data-dir", str(tmp_path / "data"), "--json", cwd=tmp_path)
        assert board(show.stdout) == board(reference.stdout)
        assert {task["status"] for task in board(show.stdout)} == {"completed"}
        for name in ("src/greet.py", "docs/review.md"):  # the members' tools ran on the workers, same files
            assert (tmp_path / "placed" / name).read_text() == (tmp_path / "embedded" / name).read_text()
        rows = work_rows(workers.url)
        assert rows and {state for _, _, state, _ in rows} == {"settled"}
        assert {kind for _, kind, _, _ in rows} == {"model", "tool"}
        assert len({member for member, *_ in rows}) == 2  # both teammates; the Lead's calls ran in its process
        holders = {holder for *_, holder in rows}
        assert len(holders) == 2, holders  # one member on each worker
        assert all("running member" in workers.stderr(i) for i in (0, 1))


class TestAWorkerDiesMidCall:
    def test_a_killed_workers_member_is_taken_over_and_the_call_in_flight_is_unknown(
            self, workers: Workers, tmp_path: Path) -> None:
        first = workers.start()
        workspace, lead = run_until_the_command_runs(workers, tmp_path, SLOW_TEAM)
        try:
            workers.start()
            workers.wait_present(2)
            first.send_signal(signal.SIGKILL)
            out, err = lead.communicate(timeout=120)
        finally:
            if lead.poll() is None:
                lead.kill()
        assert lead.returncode == 0, err
        assert bash_error(workers.url) == "TOOL_OUTCOME_UNKNOWN"  # the call in flight: unknown, never run twice
        assert (workspace / "ran.txt").read_text() == "started\n"
        show = json.loads(dsh("team", "show", "--store", workers.url, "--json", cwd=tmp_path).stdout)
        assert [(t["subject"], t["status"]) for t in show["tasks"]] == [("Slow work", "completed")]
        rows = work_rows(workers.url)
        assert {state for _, _, state, _ in rows} == {"settled"}
        holders = [holder for *_, holder in rows]
        assert len(set(holders)) == 2  # the member moved to the second worker
        assert "running member" in workers.stderr(1)
        lead_log = PostgresStore(workers.url).read("session-1")[1]
        reports = [e for e in lead_log if e.type == "user/message" and "runner finished" in json.dumps(e.value())]
        assert len(reports) == 1  # the member's report reached the Lead exactly once


class TestAFrozenWorkerIsFenced:
    def test_a_worker_frozen_past_its_lease_has_its_answer_refused(self, workers: Workers, tmp_path: Path) -> None:
        team = json.loads(json.dumps(SLOW_TEAM))
        team["runner"][1]["tool_calls"][0]["arguments"]["command"] = "echo started >> ran.txt; sleep 4; echo late >> ran.txt"
        frozen = workers.start()
        workspace, lead = run_until_the_command_runs(workers, tmp_path, team)
        try:
            frozen.send_signal(signal.SIGSTOP)  # a frozen holder: it stops renewing, its lease expires
            workers.start()
            out, err = lead.communicate(timeout=120)
            frozen.send_signal(signal.SIGCONT)  # it wakes up, its command finishes, its answer is refused
            deadline = time.monotonic() + 30
            while "answer_refused" not in workers.stderr(0) and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            if lead.poll() is None:
                lead.kill()
        assert lead.returncode == 0, err
        assert bash_error(workers.url) == "TOOL_OUTCOME_UNKNOWN"
        assert "answer_refused" in workers.stderr(0) or "lost the lease" in workers.stderr(0)
        rows = work_rows(workers.url)
        assert {state for _, _, state, _ in rows} == {"settled"}
        stored = [(kind, holder) for _, kind, _, holder in rows if kind == "tool"]
        assert len(stored) == 1


class TestTheLeadInterruptsAMemberOnAWorker:
    def test_the_call_in_flight_is_withdrawn_and_its_command_killed_on_the_worker(
            self, workers: Workers, tmp_path: Path) -> None:
        marker = "sleep 41.7"  # a command line no other process has
        team = {
            "lead": [
                {"text": "A runner.", "tool_calls": [{"name": "spawn_teammate", "arguments": {
                    "name": "runner", "description": "runs", "context": "fresh", "prompt": "run it"}}]},
                {"text": "Letting it start.", "tool_calls": [{"name": "bash", "arguments": {
                    "command": "while [ ! -e ran.txt ]; do sleep 0.05; done"}}]},
                {"text": "Stopping it.", "tool_calls": [{"name": "interrupt_agent", "arguments": {"target": "runner"}}]},
                {"text": "Stopped."},
            ],
            "runner": [
                {"text": "Running.", "tool_calls": [{"name": "bash", "arguments": {
                    "command": f"echo started > ran.txt; {marker}; echo finished >> ran.txt"}}]},
                {"text": "Done."},
            ],
        }
        script = tmp_path / "interrupt.json"
        script.write_text(json.dumps(team))
        workspace = tmp_path / "ws"
        workspace.mkdir()
        workers.start()
        workers.wait_present(1)
        started = time.monotonic()
        lead = start_lead(workers.url, tmp_path, script, workspace)
        out, err = lead.communicate(timeout=120)
        assert lead.returncode == 0, err
        assert time.monotonic() - started < 30  # the 41.7 s command did not run to its end
        assert bash_error(workers.url) == "ABORTED"
        rows = work_rows(workers.url)
        assert ("tool", "withdrawn") in {(kind, state) for _, kind, state, _ in rows}
        deadline = time.monotonic() + 10
        while subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, "the worker did not kill the interrupted command"
            time.sleep(0.1)
        assert (workspace / "ran.txt").read_text() == "started\n"


class TestAWorkerThatCannotRunACall:
    def test_it_answers_with_a_typed_failure_and_the_team_goes_on(self, workers: Workers, tmp_path: Path) -> None:
        workers.start("--profile", str(tmp_path / "missing.toml"))  # this worker cannot open the run's model
        workers.wait_present(1)
        team = {"lead": [{"text": "A member.", "tool_calls": [{"name": "spawn_teammate", "arguments": {
                    "name": "m", "description": "d", "context": "fresh", "prompt": "p"}}]}, {"text": "spawned"}],
                "m": [{"text": "never said"}]}
        script = tmp_path / "team.json"
        script.write_text(json.dumps(team))
        workspace = tmp_path / "ws"
        workspace.mkdir()
        lead = start_lead(workers.url, tmp_path, script, workspace)
        out, err = lead.communicate(timeout=120)
        assert lead.returncode == 0, err
        assert "never said" not in out
        store = PostgresStore(workers.url)
        try:
            (member,) = [session for session in store.list_ids() if session != "session-1"]
            ends = [e.value()["reason"] for e in store.read(member)[1] if e.type == "turn/end"]
        finally:
            store.close()
        assert ends and ends[0]["kind"] == "error" and ends[0]["error"]["code"] == "MODEL_ERROR"
        assert "could not run this call" in ends[0]["error"]["message"]
        assert {state for _, _, state, _ in work_rows(workers.url)} == {"settled"}


class TestMcpOnWorkers:
    def test_a_members_mcp_calls_run_on_its_worker_against_its_checkout(self, workers: Workers, tmp_path: Path) -> None:
        """The worker starts the profile's MCP server itself, in its own checkout; the Lead's copy stays idle."""
        server = Path(__file__).resolve().parents[1] / "mcp" / "mcp_test_server.py"
        profile = tmp_path / "profile.toml"
        profile.write_text(f'extends = "agent-teams"\n\n[mcp.servers.t]\ncommand = {json.dumps(sys.executable)}\n'
                           f"args = [{json.dumps(str(server))}]\n")
        team = {
            "lead": [
                {"text": "A prober.", "tool_calls": [{"name": "spawn_teammate", "arguments": {
                    "name": "prober", "description": "Asks the MCP server where it runs", "context": "fresh",
                    "prompt": "Call where and tell the Lead."}}]},
                {"when": "prober finished", "text": "Done."},
            ],
            "prober": [
                {"text": "Asking.", "tool_calls": [{"name": "mcp__t__where", "arguments": {}}]},
                {"text": "Reporting.", "tool_calls": [{"name": "send_message", "arguments": {
                    "target": "lead", "message": "prober finished"}}]},
                {"text": "Done."},
            ],
        }
        script = tmp_path / "team.json"
        script.write_text(json.dumps(team))
        lead_ws, checkout = tmp_path / "lead-ws", tmp_path / "checkout"
        lead_ws.mkdir()
        checkout.mkdir()
        workers.start("--workspace", str(checkout))
        workers.wait_present(1)
        lead = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "run", "--store", workers.url,
                               "--profile", str(profile), "--model", f"scripted:{script}", "--workspace", str(lead_ws),
                               "go"], cwd=tmp_path, env=_env(), text=True, capture_output=True, timeout=180)
        assert lead.returncode == 0, lead.stderr[-2000:]
        store = PostgresStore(workers.url)
        try:
            (member,) = [session for session in store.list_ids() if session != "session-1"]
            results = [e.value() for e in store.read(member)[1] if e.type == "tool/result"]
        finally:
            store.close()
        (where,) = [result for result in results if result["name"] == "mcp__t__where"]
        assert not where.get("is_error"), where
        answer = json.loads(where["content"][0]["text"])
        reported = json.loads(answer["content"][0]["text"])
        # The worker's server, in its checkout (the Lead's copy runs in the Lead's directory, tmp_path); its
        # parent is not compared: a sandboxed server runs under bubblewrap, in a process namespace of its own.
        assert reported["cwd"] == str(checkout)
        # Posted to the desk and settled by the worker: the prober's only placed call is the MCP one.
        assert {(kind, state, holder) for member_id, kind, state, holder in work_rows(workers.url)
                if member_id == member and kind == "tool"} == {("tool", "settled", worker_holder(workers.url))}


#: A runner whose commands (run on a worker) try to leave the workspace, then do their work there.
ESCAPING_TEAM: dict[str, Any] = {
    "lead": SLOW_TEAM["lead"],
    "runner": [
        SLOW_TEAM["runner"][0],
        {"text": "Trying.", "tool_calls": [{"name": "bash", "arguments": {
            "command": "echo owned > ../owned.txt; ls -A ~ | grep -c -x -e .ssh -e .config -e .bashrc; echo $HOME; "
                       "echo started > ran.txt"}}]},
        *SLOW_TEAM["runner"][2:],
    ],
}


#: A member whose first step reads two files at once (two calls of one member on the worker side by side).
PARALLEL_READS: dict[str, Any] = {
    "lead": [
        {"text": "A reader.", "tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "reader", "description": "Reads", "context": "fresh", "prompt": "Read the files, then report."}}]},
        {"when": "reader finished", "text": "The reader reported; done."},
    ],
    "reader": [
        {"text": "Reading both.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}},
                                                 {"name": "read_file", "arguments": {"path": "b.txt"}}]},
        {"text": "Reading a again.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "Reporting.", "tool_calls": [{"name": "send_message", "arguments": {
            "target": "lead", "message": "reader finished"}}]},
        {"text": "Done."},
    ],
}


class TestSandboxOnWorkers:
    def test_a_members_commands_on_a_worker_run_in_the_runs_sandbox(self, workers: Workers, tmp_path: Path) -> None:
        """The worker applies the policy of the run's profile: the workspace writable, nothing beside it."""
        workers.start()
        workers.wait_present(1)
        script = tmp_path / "team.json"
        script.write_text(json.dumps(ESCAPING_TEAM))
        workspace = tmp_path / "ws"
        workspace.mkdir()
        lead = start_lead(workers.url, tmp_path, script, workspace)
        out, err = lead.communicate(timeout=120)
        assert lead.returncode == 0, err[-2000:]
        assert (workspace / "ran.txt").read_text() == "started\n"  # the command ran, in the workspace
        assert not (tmp_path / "owned.txt").exists()
        rows = work_rows(workers.url)
        assert any(kind == "tool" and holder is not None for _, kind, _, holder in rows)  # on the worker
        store = PostgresStore(workers.url)
        try:
            (member,) = [session for session in store.list_ids() if session != "session-1"]
            results = [e.value() for e in store.read(member)[1] if e.type == "tool/result" and e.value()["name"] == "bash"]
        finally:
            store.close()
        output = json.loads(results[0]["content"][0]["text"])["output"]
        # ``..`` is the sandbox's private /tmp (the workspace lies under /tmp): written there, gone with it.
        assert output == f"0\n{os.environ.get('HOME', '/root')}\n", output  # and a home without its files


class TestCallsOfOneMemberSideBySide:
    def test_two_reads_at_once_leave_the_workers_copy_of_the_log_exact(self, workers: Workers, tmp_path: Path) -> None:
        """The worker's copy of the member's log is read once per row even when two calls refresh it at once:
        a row held twice would shift the member's position, and the script would skip or repeat a step."""
        workers.start()
        workers.wait_present(1)
        script = tmp_path / "team.json"
        script.write_text(json.dumps(PARALLEL_READS))
        workspace = tmp_path / "ws"
        workspace.mkdir()
        (workspace / "a.txt").write_text("alpha\n")
        (workspace / "b.txt").write_text("beta\n")
        lead = start_lead(workers.url, tmp_path, script, workspace)
        _, err = lead.communicate(timeout=120)
        assert lead.returncode == 0, err[-600:]
        store = PostgresStore(workers.url)
        try:
            (member,) = [session for session in store.list_ids() if session != "session-1"]
            events = store.read(member)[1]
        finally:
            store.close()
        texts = [block["text"] for e in events if e.type == "assistant/message"
                 for block in e.value()["content"] if block.get("type") == "text"]
        assert texts == ["Reading both.", "Reading a again.", "Reporting.", "Done."]
        calls = [e.value()["call_id"] for e in events if e.type == "tool/call"]
        assert len(calls) == len(set(calls)) == 4
        assert {kind for _, kind, _, _ in work_rows(workers.url)} == {"model", "tool"}  # it really ran on the worker


#: A runner that holds the one slot of a ``--max-members 1`` worker (its command waits for ``release.txt``),
#: and a helper the Lead spawns only once the runner's work is under way there.
FULL_POOL_TEAM: dict[str, Any] = {
    "lead": [
        {"text": "A runner first.", "tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "runner", "description": "Holds the worker", "context": "fresh", "prompt": "Run the command."}}]},
        {"when": "runner is running", "text": "Now a helper.", "tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "helper", "description": "Writes a file", "context": "fresh", "prompt": "Write the file."}}]},
        {"when": "helper finished", "text": "The helper reported."},
        {"when": "runner finished", "text": "Both reported; done."},
    ],
    "runner": [
        {"text": "Telling.", "tool_calls": [{"name": "send_message", "arguments": {
            "target": "lead", "message": "runner is running"}}]},
        {"text": "Running it.", "tool_calls": [{"name": "bash", "arguments": {
            "command": "echo started > ran.txt; while [ ! -f release.txt ]; do sleep 0.05; done"}}]},
        {"text": "Reporting.", "tool_calls": [{"name": "send_message", "arguments": {
            "target": "lead", "message": "runner finished"}}]},
        {"text": "Done."},
    ],
    "helper": [
        {"text": "Writing.", "tool_calls": [{"name": "write_file", "arguments": {
            "path": "helper.txt", "content": "written\n"}}]},
        {"text": "Reporting.", "tool_calls": [{"name": "send_message", "arguments": {
            "target": "lead", "message": "helper finished"}}]},
        {"text": "Done."},
    ],
}


class TestAFullPool:
    def test_a_member_no_worker_has_room_for_runs_in_the_leads_process_without_posting(
            self, workers: Workers, tmp_path: Path) -> None:
        workers.start("--max-members", "1")
        script = tmp_path / "team.json"
        script.write_text(json.dumps(FULL_POOL_TEAM))
        workspace = tmp_path / "ws"
        workspace.mkdir()
        workers.wait_present(1)
        lead = start_lead(workers.url, tmp_path, script, workspace)
        try:
            deadline = time.monotonic() + 60
            # The helper writes while the runner holds the one slot (from its first call on), and the
            # runner's command waits on the worker until both have happened.
            while not ((workspace / "helper.txt").exists() and (workspace / "ran.txt").exists()):
                assert time.monotonic() < deadline and lead.poll() is None, lead.communicate()[1][-800:]
                time.sleep(0.05)
            (workspace / "release.txt").write_text("go\n")
            _, err = lead.communicate(timeout=120)
        finally:
            if lead.poll() is None:
                lead.kill()
        assert lead.returncode == 0, err
        store = PostgresStore(workers.url)
        try:
            members = {session: [e.value() for e in store.read(session)[1] if e.type == "tool/result"]
                       for session in store.list_ids() if session != "session-1"}
        finally:
            store.close()
        (helper,) = [m for m, results in members.items() if any(r["name"] == "write_file" for r in results)]
        (runner,) = [m for m in members if m != helper]
        rows = work_rows(workers.url)
        # The route, from the desk: every call of the runner went to the worker; not one of the helper's
        # calls was posted (so none waited for a withdrawal), and nothing was withdrawn.
        assert {member for member, *_ in rows} == {runner}, rows
        assert {state for _, _, state, _ in rows} == {"settled"}, rows
        assert (workspace / "helper.txt").read_text() == "written\n"
        assert "placement.workers_full" in err and "every live worker is full" in err, err
        with psycopg.connect(workers.url) as conn:  # the worker said its room on its presence
            assert conn.execute("SELECT capacity FROM dsh_leases WHERE key LIKE 'worker:%'").fetchone() == (1,)
