"""``dsh chat`` on a real pseudo-terminal: a Team conversation, Ctrl-C, exit and ``--resume``.

The child gets the pty as its controlling terminal (``os.forkpty``), so Ctrl-C is
the byte ``\\x03`` going through the line discipline, which signals the foreground
process group exactly as a keyboard does. The model is the scripted ``llm``
plugin (``kit_llm``), so ``llm:`` runs here too.
"""

from __future__ import annotations

import os
import re
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from host_spec.events import EventType
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text
from kit_llm import child_env, logged, step

pytestmark = pytest.mark.slow

#: A safety net against a hang, never a speed assertion.
PATIENCE = 90.0
_ANSI = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]|\r")


class Pty:
    """A child process on a pseudo-terminal, read with ``expect``."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        pid, fd = os.forkpty()
        if pid == 0:  # the child: its stdin, stdout and stderr are the pty's slave side
            try:
                os.execve(argv[0], argv, env)
            finally:  # never back into pytest: a failed exec ends the child here
                os.kill(os.getpid(), signal.SIGKILL)
        self.pid, self.fd = pid, fd
        self.seen = b""
        self.mark = 0
        self.status: int | None = None

    def send(self, text: str | bytes) -> None:
        os.write(self.fd, text.encode() if isinstance(text, str) else text)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            chunk = b""
        if not chunk:
            raise EOFError(self.text())
        self.seen += _ANSI.sub(b"", chunk)
        return True

    def expect(self, pattern: str, timeout: float = PATIENCE) -> str:
        """Wait for ``pattern`` (a regex) in the output after the previous match; returns the match."""
        regex = re.compile(pattern.encode())
        deadline = time.monotonic() + timeout
        while True:
            found = regex.search(self.seen, self.mark)
            if found:
                self.mark = found.end()
                return found.group().decode()
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {pattern!r} in:\n{self.text()}"
            try:
                self._read(min(remaining, 0.5))
            except EOFError:
                assert regex.search(self.seen, self.mark), f"exited without {pattern!r}:\n{self.text()}"

    def text(self) -> str:
        return self.seen.decode(errors="replace")

    def wait(self, timeout: float = PATIENCE) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
            try:
                self._read(0.1)
            except EOFError:
                pass
        raise AssertionError(f"the chat did not exit:\n{self.text()}")

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        os.close(self.fd)


def chat(env: dict[str, str], *args: str) -> Pty:
    return Pty([sys.executable, "-m", "host_spec.host.cli.main", "chat", *args], env)


SCRIPT: dict[str, Any] = {
    "[lead]": [
        step("I will ask alice.", ("spawn_teammate", {"name": "alice", "description": "helper",
                                                      "prompt": "[alice] report to the lead"}), usage=(10, 3)),
        step("waiting for alice", usage=(4, 1)),
        step("thanks alice", usage=(4, 1)),
    ],
    "[alice]": [step("", ("send_message", {"target": "lead", "message": "alice reports: ready"})),
                step("alice done")],
    "@status please": [step("alice here, all good")],
    "@go slow": [step("slow " * 30, chunks=30, sleep=30)],
    "@after that": [step("back after the interrupt")],
    "@one more": [step("same session, history intact")],
}


def test_a_team_conversation_with_interrupt_exit_and_resume(tmp_path: Path) -> None:
    env = child_env(tmp_path, SCRIPT, TERM="dumb")
    data = str(tmp_path / "data")
    first = chat(env, "--model", "llm:dsh-scripted", "--data-dir", data)
    try:
        first.expect(r"dsh chat: session (\S+)")
        first.expect(r"> ")
        first.send("[lead] build it with alice\n")
        first.expect(r"\[lead\] assistant: I will ask alice\.")
        first.expect(r"\[lead\] assistant: thanks alice")  # alice's message woke the Lead
        if "[alice] assistant: alice done" not in first.text():
            first.expect(r"\[alice\] assistant: alice done")
        first.send("/team\n")
        first.expect(r"alice\s+inactive\s+llm:dsh-scripted")
        first.expect(r"tasks:\n  \(none\)")
        first.send("/help\n")
        first.expect(r"/send NAME text\s+send text to a member")
        # The spawn's JSON result is one short line with its number; /last N prints it in full.
        shown = first.text()
        assert re.search(r"/last \[N\]\s+tool result N in full", shown)
        assert re.search(r"\[lead\] tool result spawn_teammate \{[^\n]*\.\.\. \(#1 \+\d+ chars, /last 1\)\n", shown)
        assert shown.count("<system-reminder>") == 1  # alice's identity reminder, once
        first.send("/last 1\n")
        first.expect(r"\[lead\] tool result spawn_teammate #1:\n\{.*\"target\":\"alice\".*\}\n")
        first.send("/nope\n")
        first.expect(r"unknown command /nope \(/help lists them\)")
        first.send("/send nobody hi\n")  # a command's error is shown; the conversation goes on
        first.expect(r"error: TEAM_MEMBER_NOT_FOUND: no member named 'nobody'")
        first.send("/send alice status please\n")
        first.expect(r"\(sent to alice\)")
        first.expect(r"\[alice\] assistant: alice here, all good")

        first.send("go slow\n")
        first.expect(r"\.\.\. working \d+s: lead")  # the progress line of a long wait
        first.send(b"\x03")  # Ctrl-C on the terminal: SIGINT to the foreground process group
        first.expect(r"\(interrupted\)")
        first.expect(r'turn ended: \{"kind":"aborted","reason":\{"kind":"user","detail":"Ctrl-C"\}\}')
        first.expect(r"> ")
        assert [e["tag"] for e in logged(tmp_path) if "closed" in e] == ["[lead]"]  # the plugin's stream was closed
        first.send("after that\n")  # the process lived on: the next line is the next turn
        first.expect(r"\[lead\] assistant: back after the interrupt")
        first.expect(r"> ")
        first.send(b"\x03")
        first.expect(r"\(Ctrl-C again, Ctrl-D or /exit to leave\)")
        first.send(b"\x03")
        first.expect(r"continue with: dsh chat --resume session-1")
        assert first.wait() == 0
    finally:
        first.close()

    second = chat(env, "--resume", "--data-dir", data)
    try:
        second.expect(r"\(resumed session session-1: \d+ turns so far\)")
        second.expect(r"\[lead\] assistant: back after the interrupt")  # the recap
        second.expect(r"> ")
        second.send("one more\n")
        second.expect(r"\[lead\] assistant: same session, history intact")
        second.expect(r"> ")
        second.send("/exit\n")
        assert second.wait() == 0
    finally:
        second.close()

    store = JsonlStore(Path(data))
    roots = [s for s in store.list_ids() if store.read(s)[0].parent_session is None]
    assert roots == ["session-1"]
    events = store.read("session-1")[1]
    typed = [message_text(e.value()["content"]) for e in events
             if e.type == EventType.USER_MESSAGE and e.value()["source"].get("kind") == "user"]
    assert typed == ["[lead] build it with alice", "go slow", "after that", "one more"]
    asked = [e for e in logged(tmp_path) if "roles" in e]
    # The resumed Lead's call carried the whole conversation, and every Lead call offered the Team tools.
    assert asked[-1]["roles"].count("user") >= 5 and "spawn_teammate" in asked[-1]["tools"]


def test_a_chat_killed_mid_turn_resumes_and_finishes_that_turn(tmp_path: Path) -> None:
    script = {"@go slow": [step("slow " * 30, chunks=30, sleep=30)],
              "@The host stopped while you were working": [step("picked up after the crash")]}
    env = child_env(tmp_path, script, TERM="dumb")
    data = str(tmp_path / "data")
    first = chat(env, "--model", "llm:dsh-scripted", "--data-dir", data)
    try:
        first.expect(r"> ")
        first.send("go slow\n")
        deadline = time.monotonic() + PATIENCE
        while not [e for e in logged(tmp_path) if "roles" in e]:  # the model call is under way
            assert time.monotonic() < deadline, first.text()
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait() == -signal.SIGKILL
    finally:
        first.close()
    second = chat(env, "--resume", "--data-dir", data)
    try:
        second.expect(r"\(resumed session session-1: 0 turns so far\)")
        second.expect(r"\[lead\] user \(resume\): The host stopped while you were working")
        second.expect(r"\[lead\] assistant: picked up after the crash")
        second.expect(r"> ")
        second.send(b"\x04")  # Ctrl-D at the prompt
        assert second.wait() == 0
    finally:
        second.close()
    events = JsonlStore(Path(data)).read("session-1")[1]
    reasons = [e.value()["reason"]["kind"] for e in events if e.type == EventType.TURN_END]
    assert reasons == ["interrupted", "completed"]
