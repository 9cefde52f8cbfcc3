"""``dsh chat``'s parts without a terminal: its terminal on a pipe, command discovery, refused starts."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import pytest

from host_spec.chat import ChatCommand
from host_spec.host.cli.chat import chat_commands
from host_spec.host.cli.chat_terminal import PROMPT, ChatTerminal
from host_spec.host.cli.main import main


def _noop(context: object, argument: str) -> None:
    return None


class TestTerminal:
    async def test_lines_arrive_as_events_split_across_reads_and_the_tail_before_eof(self) -> None:
        read, write = os.pipe()
        terminal = ChatTerminal(out=io.StringIO(), fd=read)
        terminal.start()
        try:
            os.write(write, "first\nsec".encode())
            assert await asyncio.wait_for(terminal.events.get(), 10) == ("line", "first")
            os.write(write, "ond \u00e9\r\nthird".encode())
            assert await asyncio.wait_for(terminal.events.get(), 10) == ("line", "second \u00e9")
            os.close(write)
            assert await asyncio.wait_for(terminal.events.get(), 10) == ("line", "third")
            assert await asyncio.wait_for(terminal.events.get(), 10) == ("eof", None)
        finally:
            terminal.stop()
            os.close(read)

    def test_output_off_a_terminal_keeps_the_prompt_below_and_shows_no_progress(self) -> None:
        out = io.StringIO()
        terminal = ChatTerminal(out=out, fd=0)
        terminal.write("one")
        terminal.prompt()
        terminal.prompt()  # shown once
        terminal.write("[alice] two")
        terminal.progress(0.0, ["lead"])  # not a terminal: no progress line
        terminal.clear_progress()
        assert out.getvalue() == f"one\n{PROMPT}\n[alice] two\n{PROMPT}"


class TestCommands:
    def test_contributors_are_merged_and_a_broken_one_is_skipped(self, capsys: pytest.CaptureFixture[str]) -> None:
        def good() -> list[ChatCommand]:
            return [ChatCommand("hello", "", "say hello", _noop), ChatCommand("exit", "", "hijack", _noop)]

        def again() -> list[ChatCommand]:
            return [ChatCommand("hello", "", "second hello", _noop)]

        def broken() -> list[ChatCommand]:
            raise RuntimeError("boom")

        found = chat_commands([("a", good), ("b", broken), ("c", again)])
        assert list(found) == ["hello"] and found["hello"].summary == "say hello"  # built-ins cannot be replaced
        assert 'chat command "b" failed: RuntimeError: boom' in capsys.readouterr().err

    def test_the_installed_team_commands_are_found(self) -> None:
        assert {"team", "send"} <= set(chat_commands())


class TestRefused:
    def test_a_new_chat_needs_a_model(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["chat", "--data-dir", str(tmp_path / "data")]) == 2
        assert "dsh: CLI_USAGE: dsh chat needs --model" in capsys.readouterr().err
        assert not (tmp_path / "data").exists()

    def test_resume_needs_a_stored_session(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["chat", "--resume", "--data-dir", str(tmp_path / "missing")]) == 2
        assert "DATA_DIR_NOT_FOUND" in capsys.readouterr().err
        (tmp_path / "data").mkdir()
        assert main(["chat", "--resume", "session-9", "--data-dir", str(tmp_path / "data")]) == 2
        assert "SESSION_NOT_FOUND" in capsys.readouterr().err
