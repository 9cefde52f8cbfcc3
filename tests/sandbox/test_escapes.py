"""A member's command tries to get out; the real sandbox (bubblewrap) stops each attempt and the agent goes on.

Every test runs the ``bash`` tool through a real host under the default policy
(``workspace-write``) with the data dir inside the workspace, exactly as ``dsh
run`` lays it out. Each has an oracle outside the sandbox (the file on disk, the
listener's accepted connections, ``/proc``), and each attack that must fail is
paired with the same command succeeding where the policy allows it, so a test
whose command could never have worked proves nothing and fails.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_kit import call, lead_in, open_host, outside_dir, processes_with

pytestmark = pytest.mark.timeout_s(120)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    (path / ".git" / "hooks").mkdir(parents=True)
    return path


@pytest.fixture
def outside() -> Iterator[Path]:
    yield from outside_dir("dsh-outside-")


async def run(ws: Path, *commands: str, sandbox: dict | None = None, timeout_ms: int | None = None) -> list:
    host = await open_host(ws, sandbox)
    try:
        agent = await lead_in(host, ws)
        results = []
        for command in commands:
            arguments = {"command": command} | ({} if timeout_ms is None else {"timeout_ms": timeout_ms})
            results.append(await call(host, agent, "bash", **arguments))
        results.append(await call(host, agent, "bash", command="echo still-working"))  # the member goes on
        return results
    finally:
        await host.close()


def assert_goes_on(results: list) -> None:
    assert results[-1].value == {"exit_code": 0, "output": "still-working\n", "output_bytes": 14}


async def test_a_write_outside_the_workspace_fails(ws, outside) -> None:
    results = await run(ws, f"echo owned > {outside}/owned; echo inside > inside.txt")
    assert "Read-only file system" in results[0].output
    assert not (outside / "owned").exists()
    assert (ws / "inside.txt").read_text() == "inside\n"  # the workspace itself is writable
    assert_goes_on(results)


async def test_full_policy_is_no_sandbox(ws, outside) -> None:
    """The oracle of the test above: the same write succeeds when the profile says ``full``."""
    results = await run(ws, f"echo owned > {outside}/owned", sandbox={"policy": "full"})
    assert results[0].value["exit_code"] == 0 and (outside / "owned").read_text() == "owned\n"


async def test_read_only_policy_refuses_the_workspace_too(ws) -> None:
    results = await run(ws, "echo x > mine.txt; echo scratch > /tmp/t && cat /tmp/t", sandbox={"policy": "read-only"})
    assert "Read-only file system" in results[0].output and "scratch" in results[0].output  # a private /tmp
    assert not (ws / "mine.txt").exists()
    assert_goes_on(results)


async def test_git_hooks_and_protected_paths_stay_read_only(ws) -> None:
    (ws / "secrets").mkdir()
    results = await run(ws, "echo 'curl evil' > .git/hooks/pre-commit", "echo x > secrets/key", "echo ok > src.txt",
                        sandbox={"protected": ["secrets"]})
    assert "Read-only file system" in results[0].output and "Read-only file system" in results[1].output
    assert not (ws / ".git" / "hooks" / "pre-commit").exists() and not (ws / "secrets" / "key").exists()
    assert (ws / "src.txt").read_text() == "ok\n"
    assert_goes_on(results)


async def test_a_secret_under_home_is_not_visible(ws, monkeypatch) -> None:
    for home in outside_dir("dsh-home-"):  # outside /tmp: only the emptied home hides it
        (home / ".ssh").mkdir()
        (home / ".ssh" / "id_rsa").write_text("PLANTED-PRIVATE-KEY\n")
        (home / ".gitconfig").write_text("[user]\n name = listed\n")
        monkeypatch.setenv("HOME", str(home))
        results = await run(ws, f"cat ~/.ssh/id_rsa {home}/.ssh/id_rsa; ls -A ~; echo HOME=$HOME",
                            "cat ~/.gitconfig; echo changed > ~/.gitconfig", sandbox={"home_paths": [".gitconfig"]})
        assert "PLANTED-PRIVATE-KEY" not in results[0].output and "No such file" in results[0].output
        assert f"HOME={home}" in results[0].output
        assert "name = listed" in results[1].output and "Read-only file system" in results[1].output  # listed: read
        assert (home / ".gitconfig").read_text() == "[user]\n name = listed\n"
        assert_goes_on(results)
        full = await run(ws, f"cat {home}/.ssh/id_rsa", sandbox={"policy": "full"})
        assert "PLANTED-PRIVATE-KEY" in full[0].output  # the oracle: the file is there to be read


async def test_the_data_dir_is_neither_readable_nor_writable(ws) -> None:
    host = await open_host(ws)
    try:
        agent = await lead_in(host, ws)
        await call(host, agent, "bash", command="echo a-line-of-the-lead-log")
        await agent.session.flush()
        logs = [p for p in (ws / ".dsh-data").rglob("*") if p.is_file()]
        assert logs, "the host wrote its log into the data dir"
        before = {p: p.read_bytes() for p in logs}
        probe = await call(host, agent, "bash", command="ls -A .dsh-data; cat .dsh-data/*/* 2>&1; "
                                                       "echo forged > .dsh-data/forged; grep -r a-line .dsh-data")
        read = await call(host, agent, "read_file", path=str(logs[0].relative_to(ws)))
        write = await call(host, agent, "write_file", path=".dsh-data/forged", content="x")
        listed = await call(host, agent, "glob", pattern="**")
        found = await call(host, agent, "grep", pattern="a-line-of-the-lead-log", path=".")
        listing = await call(host, agent, "list_dir", path=".")
        after = await call(host, agent, "bash", command="echo still-working")
    finally:
        await host.close()
    assert "a-line-of-the-lead-log" not in probe.output.replace("grep -r a-line", "")
    assert "Read-only file system" in probe.output and not (ws / ".dsh-data" / "forged").exists()
    assert all(p.read_bytes().startswith(before[p]) for p in logs)  # appended to by the host only
    assert read.code == write.code == "PATH_PROTECTED"
    assert not any(item.startswith(".dsh-data") for item in listed.value["items"])
    assert not found.value["items"] and ".dsh-data/" not in listing.value["items"]
    assert after.output == "still-working\n"


async def test_a_data_dir_outside_the_workspace_is_hidden_too(ws) -> None:
    for data in outside_dir("dsh-data-"):
        host = await open_host(ws, data=data)
        try:
            agent = await lead_in(host, ws)
            await call(host, agent, "bash", command="true")
            await agent.session.flush()
            assert any(p.is_file() for p in data.rglob("*"))
            probe = await call(host, agent, "bash", command=f"ls -A {data} | wc -l; touch {data}/x")
        finally:
            await host.close()
        assert probe.output.startswith("0\n") and "Read-only file system" in probe.output
        assert not (data / "x").exists()


async def test_a_data_dir_holding_the_workspace_shows_only_the_workspace(tmp_path) -> None:
    """The demo's layout (``DATA/workspace``): the logs beside the workspace stay out of reach."""
    data = tmp_path / "data"
    ws = data / "workspace"
    ws.mkdir(parents=True)
    host = await open_host(ws, data=data)
    try:
        agent = await lead_in(host, ws)
        await call(host, agent, "bash", command="true")
        await agent.session.flush()
        logs = [p for p in data.rglob("*") if p.is_file() and ws not in p.parents]
        probe = await call(host, agent, "bash", command=f"ls -A {data}; echo x > {data}/forged; echo ok > mine.txt")
        edit = await call(host, agent, "write_file", path="src/a.py", content="print(1)\n")
    finally:
        await host.close()
    assert logs and probe.output.startswith("workspace\n") and "Read-only file system" in probe.output
    assert not (data / "forged").exists() and (ws / "mine.txt").read_text() == "ok\n"
    assert edit.code is None and (ws / "src" / "a.py").exists()


async def test_no_tcp_connection_to_a_local_listener(ws) -> None:
    accepted: list[int] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    command = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED"
    try:
        results = await run(ws, command)
        assert "CONNECTED" not in results[0].output and results[0].value["exit_code"] != 0
        await asyncio.sleep(0.2)
        assert accepted == []
        assert_goes_on(results)
        allowed = await run(ws, command, sandbox={"network": True})  # the oracle: a policy allowing it connects
        assert "CONNECTED" in allowed[0].output
        for _ in range(50):
            if accepted:
                break
            await asyncio.sleep(0.05)
        assert accepted == [1]
    finally:
        server.close()
        await server.wait_closed()


async def test_a_symlink_does_not_lead_out(ws, outside) -> None:
    (outside / "target.txt").write_text("original\n")
    os.symlink(outside, ws / "link")
    os.symlink(ws / ".dsh-data", ws / "data-link")
    results = await run(ws, "echo changed > link/target.txt; echo new > link/new.txt",
                        "ln -sfn / root-link; echo x > root-link/etc/dsh-owned", "ls -A data-link | wc -l")
    assert results[0].output.count("Read-only file system") == 2
    assert (outside / "target.txt").read_text() == "original\n" and not (outside / "new.txt").exists()
    assert "Read-only file system" in results[1].output and not Path("/etc/dsh-owned").exists()
    assert results[2].output == "0\n"
    assert_goes_on(results)


async def test_the_host_process_cannot_be_killed(ws) -> None:
    results = await run(ws, f"kill -9 {os.getpid()}; kill -9 -1; echo survived")
    assert "survived" in results[0].output  # kill -1 reaches only the sandbox's own processes
    assert "No such process" in results[0].output
    assert_goes_on(results)  # and so did the host: this test is still running


async def test_a_fork_bomb_ends_within_its_limit(ws) -> None:
    marker = f"dsh-fork-bomb-{os.getpid()}"
    bomb = f"bash -c 'b() {{ b | b & }}; b; wait' {marker}"
    results = await run(ws, bomb + "; echo done", sandbox={"max_processes": 64}, timeout_ms=4000)
    assert results[0].code == "BASH_TIMEOUT" or "Resource temporarily unavailable" in results[0].output
    assert await gone(marker)  # the whole sandbox went with the command
    assert_goes_on(results)


async def test_the_process_limit_is_the_commands_own(ws) -> None:
    """Forking until the kernel refuses stops near the limit (the children wait; the command's end kills them)."""
    counter = ("import os, signal\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
               "            signal.pause()\n        n += 1\nexcept OSError as e:\n    print('LIMIT', n, e.errno)")
    results = await run(ws, f"python3 -c \"{counter}\"", sandbox={"max_processes": 32})
    words = results[0].output.split()
    assert words[0] == "LIMIT" and 16 <= int(words[1]) <= 32 and words[2] == "11", results[0].output  # EAGAIN
    assert_goes_on(results)


async def test_a_memory_hog_hits_its_limit(ws) -> None:
    results = await run(ws, "python3 -c 'x = bytearray(600 * 1024 * 1024); print(\"ALLOCATED\")'",
                        sandbox={"memory_mb": 256})
    assert "ALLOCATED" not in results[0].output and "MemoryError" in results[0].output
    assert_goes_on(results)


async def gone(marker: str) -> bool:
    for _ in range(100):
        if not processes_with(marker):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_background_processes_do_not_outlive_the_command(ws) -> None:
    """Even one that left the process group with ``setsid``: the sandbox's pid namespace goes as a whole."""
    marker = f"dsh-leftover-{os.getpid()}"
    # The command waits until the escaped process is in its own session, so the group kill cannot race it.
    command = (f"rm -f escaped; (setsid bash -c 'touch escaped; sleep 300; :' {marker} &) ; "
               "until [ -e escaped ]; do sleep 0.02; done; echo started")
    results = await run(ws, command)
    assert results[0].output == "started\n"
    assert await gone(marker)
    unsandboxed = await run(ws, command, sandbox={"policy": "full"})  # the oracle: without it, setsid escapes
    try:
        for _ in range(100):
            if processes_with(marker):
                break
            await asyncio.sleep(0.05)
        assert unsandboxed[0].output == "started\n" and processes_with(marker)
    finally:
        for pid in processes_with(marker):
            os.kill(pid, 9)


async def test_run_stays_hidden_with_the_network_on(ws) -> None:
    """``/run`` holds local service sockets (a container engine's is root on the machine): never visible."""
    assert os.listdir("/run"), "the oracle: the host's /run has entries"
    results = await run(ws, "ls -A /run | grep -v -x -e systemd -e resolvconf -e NetworkManager | wc -l",
                        sandbox={"network": True})
    assert results[0].output == "0\n"  # at most the resolver's directories, bound back
    assert_goes_on(results)


async def test_a_workspace_under_home_is_visible_and_a_home_workspace_too(monkeypatch) -> None:
    for home in outside_dir("dsh-home-ws-"):
        (home / ".ssh").mkdir()
        (home / ".ssh" / "id_rsa").write_text("PLANTED\n")
        project = home / "project"
        project.mkdir()
        monkeypatch.setenv("HOME", str(home))
        inside = await run(project, "echo made > made.txt; cat ~/.ssh/id_rsa")
        assert (project / "made.txt").exists() and "PLANTED" not in inside[0].output
        itself = await run(home, "echo made > home-made.txt; ls -A | sort | tr '\\n' ' '")
        assert (home / "home-made.txt").exists() and ".ssh" in itself[0].output  # the home is the workspace
