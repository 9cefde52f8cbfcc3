"""``dsh chat``'s parts without a terminal: its terminal on a pipe, command discovery, refused starts."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import pytest

from host_spec.chat import ChatCommand
from host_spec.events import Event, EventType, encode_data
from host_spec.host.cli.chat import ChatSession, chat_commands
from host_spec.host.cli.chat_render import KEPT_RESULTS, RESULT_WIDTH
from host_spec.host.cli.chat_terminal import PROMPT, ChatFeed, ChatTerminal
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


class _Session:
    """What the transcript reads of a session: its id (the feed names it from ``dsh_agent_created``)."""

    def __init__(self, session_id: str) -> None:
        self.id = session_id


class _Agent:
    def __init__(self, agent_id: str, name: str) -> None:
        self.id, self.name = agent_id, name


def _event(seq: int, kind: str, payload: dict[str, object]) -> Event:
    return Event(seq=seq, time=seq, type=kind, data=encode_data(payload))


def _reminder(name: str) -> str:
    from dsh_team_tools.reminder import identity_reminder  # the real one, seven lines

    return identity_reminder(name)


class TestChatScreen:
    def test_tool_results_are_one_short_line_and_last_prints_them_in_full(self) -> None:
        out = io.StringIO()
        terminal = ChatTerminal(out=out, fd=0)
        feed = ChatFeed(terminal, lambda session: "lead")
        long = '{\n  "target": "alice",\n  "status": "running",\n  "description": "' + "x" * 300 + '"\n}'
        results = [("spawn_teammate", long, False), ("team_task_list", '{"tasks":[]}', False),
                   ("bash", "line one\nline two", True)]
        for seq, (name, text, error) in enumerate(results, 1):
            feed.dsh_session_event(_Session("lead"), _event(seq, EventType.TOOL_RESULT, {
                "turn": 1, "step": seq, "call_id": f"c{seq}", "name": name, "is_error": error,
                "content": [{"type": "text", "text": text}]}))
        lines = out.getvalue().splitlines()
        assert len(lines) == 3  # one line per result, however long or multi-line the result
        hidden = len(" ".join(long.split())) - RESULT_WIDTH
        assert lines[0] == ('[lead] tool result spawn_teammate { "target": "alice", "status": "running", '
                            f'"description": "{"x" * (RESULT_WIDTH - 58)}... (#1 +{hidden} chars, /last 1)')
        assert lines[1] == '[lead] tool result team_task_list {"tasks":[]}'
        assert lines[2] == "[lead] tool result bash (error) line one line two (#3, /last 3)"

        session = ChatSession(None, None, terminal, {}, render=feed.render)
        out.truncate(0), out.seek(0)
        assert not asyncio.run(session.handle_line("/last 1"))
        assert out.getvalue() == "[lead] tool result spawn_teammate #1:\n" + long + "\n"
        out.truncate(0), out.seek(0)
        asyncio.run(session.handle_line("/last"))
        assert out.getvalue() == "[lead] tool result bash (error) #3:\nline one\nline two\n"
        out.truncate(0), out.seek(0)
        asyncio.run(session.handle_line("/last 9"))
        asyncio.run(session.handle_line("/help"))
        shown = out.getvalue()
        assert shown.startswith("(no tool result 9: /last N shows one of #1..#3)\n")
        assert "/last [N]" in shown

    def test_only_the_newest_results_are_kept_and_none_yet_is_said(self) -> None:
        out = io.StringIO()
        feed = ChatFeed(ChatTerminal(out=out, fd=0), lambda session: "lead")
        assert feed.render.last("") == ["(no tool result yet)"]
        for seq in range(1, KEPT_RESULTS + 3):
            feed.dsh_session_event(_Session("lead"), _event(seq, EventType.TOOL_RESULT, {
                "turn": 1, "step": seq, "call_id": f"c{seq}", "name": "t", "content": [{"type": "text", "text": str(seq)}]}))
        assert feed.render.last("1") == [f"(no tool result 1: /last N shows one of #3..#{KEPT_RESULTS + 2})"]
        assert feed.render.last("3") == ["[lead] tool result t #3:", "3"]

    def test_the_identity_reminder_is_printed_once_not_per_spawn(self) -> None:
        out = io.StringIO()
        feed = ChatFeed(ChatTerminal(out=out, fd=0), lambda session: "?")
        for seq, (session_id, name) in enumerate((("c1", "alice"), ("c2", "bob")), 1):
            feed.dsh_agent_created(_Agent(session_id, name))
            feed.dsh_session_event(_Session(session_id), _event(seq, EventType.USER_MESSAGE, {
                "content": [{"type": "text", "text": _reminder(name)}, {"type": "text", "text": f"[{name}] do it"}],
                "source": {"kind": "spawn"}}))
        text = out.getvalue()
        assert text.count("<system-reminder>") == 1 and 'You are teammate "alice"' in text
        assert "[bob] user (spawn): (system reminder, as above) [bob] do it" in text.splitlines()
        assert len(text.splitlines()) == 7 + 2 + 1  # alice's seven reminder lines, a blank one and its task; bob's one


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
