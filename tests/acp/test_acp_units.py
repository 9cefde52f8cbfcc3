"""The pieces of ``dsh acp`` that need no editor: the MCP join, the event mapping, prompt turns, the plan."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import acp
import attrs
import pytest
from acp.schema import AcpMcpServer, EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer

from host_spec.events import Event, EventType, encode_data
from host_spec.permissions import TOOL_PERMISSION
from host_spec.host.acp.agent import prompt_blocks
from host_spec.host.acp.asks import OPTIONS, ask_call_id, ask_title
from host_spec.host.acp.feed import UpdateSender
from host_spec.host.acp.progress import Progress
from host_spec.host.acp.servers import joined_profile
from host_spec.host.acp.turns import NOT_STARTED, TurnWaits, stop_reason
from host_spec.host.acp.updates import RESULT_CHARS, ToolCalls, event_updates
from host_spec.progress import ProgressItem


def _stdio(name: str) -> McpServerStdio:
    return McpServerStdio(name=name, command="/bin/true", args=["-x"], env=[EnvVariable(name="TOKEN", value="s3")])


class TestJoinedProfile:
    def test_no_client_servers_keep_the_profile(self) -> None:
        assert joined_profile("agent-teams", []).config("mcp") is None

    def test_client_servers_load_the_mcp_plugin_first(self) -> None:
        http = HttpMcpServer(type="http", name="web", url="http://127.0.0.1:1/mcp",
                             headers=[HttpHeader(name="Authorization", value="Bearer x")])
        sse = SseMcpServer(type="sse", name="old", url="http://127.0.0.1:2/sse", headers=[])
        profile = joined_profile("agent-teams", [_stdio("files"), http, sse])
        assert profile.plugins[0].name == "mcp"
        assert profile.config("mcp") == {"servers": {
            "files": {"command": "/bin/true", "args": ["-x"], "env": {"TOKEN": "s3"}},
            "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer x"}},
            "old": {"type": "sse", "url": "http://127.0.0.1:2/sse", "headers": {}},
        }}
        assert profile.names()[1:] == joined_profile("agent-teams", []).names()

    def test_the_profiles_server_wins_a_name(self, tmp_path: Path) -> None:
        path = tmp_path / "p.toml"
        path.write_text('extends = "agent-teams"\n[mcp.servers.files]\ncommand = "/bin/own"\n')
        servers = joined_profile(str(path), [_stdio("files"), _stdio("extra")]).config("mcp")["servers"]
        assert servers["files"]["command"] == "/bin/own" and servers["extra"]["command"] == "/bin/true"

    def test_a_transport_not_offered_is_left_out(self) -> None:
        over_acp = AcpMcpServer(type="acp", name="tunnel", server_id="s-1")
        assert joined_profile("agent-teams", [over_acp]).config("mcp") is None
        assert joined_profile("agent-teams", [over_acp, _stdio("files")]).config("mcp")["servers"].keys() == {"files"}

    def test_a_profile_disabling_mcp_gets_none(self, tmp_path: Path) -> None:
        path = tmp_path / "p.toml"
        path.write_text('extends = "agent-teams"\ndisable = ["mcp"]\n')
        assert joined_profile(str(path), [_stdio("files")]).config("mcp") is None


def _event(kind: str, data: dict[str, Any]) -> Event:
    return Event(seq=1, time=0, type=kind, data=encode_data(data))


class TestEventUpdates:
    def test_a_tool_call_with_malformed_arguments_and_a_long_title(self) -> None:
        call = _event(EventType.TOOL_CALL, {"turn": 1, "step": 1, "call_id": "c1", "name": "bash",
                                            "arguments": '{"command": "' + "x" * 200 + '"}'})
        (start,) = event_updates("alice", "s", call, lead=False)
        assert start.tool_call_id == "s:c1" and start.kind == "execute" and start.status == "pending"
        assert start.title.startswith("alice: bash xxx") and start.title.endswith("...") and len(start.title) < 100
        broken = _event(EventType.TOOL_CALL, {"turn": 1, "step": 1, "call_id": "c2", "name": "mcp__x__y",
                                              "arguments": "{not json"})
        (start,) = event_updates("alice", "s", broken, lead=False)
        assert start.raw_input == "{not json" and start.kind == "other" and start.title == "alice: mcp__x__y"

    def test_a_long_result_is_cut_and_a_failure_names_its_code(self) -> None:
        long = _event(EventType.TOOL_RESULT, {"turn": 1, "step": 1, "call_id": "c1", "name": "read_file",
                                              "content": [{"type": "text", "text": "y" * (RESULT_CHARS + 10)}]})
        (done,) = event_updates("lead", "s", long, lead=True)
        assert done.status == "completed" and done.content[0].content.text.endswith("(10 more characters in the log)")
        failed = _event(EventType.TOOL_RESULT, {"turn": 1, "step": 1, "call_id": "c2", "name": "bash", "content": [],
                                                "is_error": True, "error": {"code": "X_FAILED", "message": "m"}})
        (done,) = event_updates("lead", "s", failed, lead=True)
        assert done.status == "failed" and done.content[0].content.text == "X_FAILED: "
        assert done.raw_output == {"code": "X_FAILED", "message": "m"}

    def test_messages_live_and_replayed(self) -> None:
        user = _event(EventType.USER_MESSAGE, {"id": "m", "role": "user", "content": [{"type": "text", "text": "hi"}],
                                               "source": {"kind": "user"}})
        assert event_updates("lead", "s", user, lead=True) == []  # the editor shows its own line
        (replayed,) = event_updates("lead", "s", user, lead=True, replay=True)
        assert replayed.session_update == "user_message_chunk" and replayed.content.text == "hi"
        (member,) = event_updates("bob", "s2", user, lead=False)
        assert member.session_update == "agent_thought_chunk" and member.content.text == "[bob] user: hi\n"
        quiet = _event(EventType.ASSISTANT_MESSAGE, {"turn": 1, "step": 1, "content": [{"type": "text", "text": " "}]})
        assert event_updates("lead", "s", quiet, lead=True) == []
        assert event_updates("lead", "s", _event(EventType.STEP_START, {"turn": 1, "step": 1}), lead=True) == []


class TestToolCalls:
    def test_the_oldest_recorded_call_starts_and_a_refused_one_is_forgotten(self) -> None:
        calls = ToolCalls()
        calls.recorded("a", "bash", "s:1")
        calls.recorded("a", "bash", "s:2")
        calls.recorded("a", "grep", "s:3")
        calls.finished("a", "grep", "s:3")  # refused before its body: never started
        assert calls.started("a", "grep") is None
        assert calls.started("a", "bash").tool_call_id == "s:1"
        assert calls.started("a", "bash").tool_call_id == "s:2"
        assert calls.started("a", "bash") is None
        calls.finished("b", "bash", "s:9")  # nothing recorded: nothing to forget


class TestTurnWaits:
    async def test_the_turn_that_claimed_a_prompt_answers_it(self) -> None:
        waits = TurnWaits()
        mine, queued = waits.add("m1"), waits.add("m2")
        waits.claimed("m1")
        waits.turn_ended({"kind": "completed"})
        assert mine.done.result() == {"kind": "completed"} and not queued.done.done()
        waits.cancel()
        waits.turn_ended({"kind": "completed"})  # the running turn ended: a cancelled prompt is answered too
        assert stop_reason(queued.done.result()) == "cancelled"

    async def test_a_lead_stopping_without_the_prompt_and_a_dropped_one(self) -> None:
        waits = TurnWaits()
        refused, dropped, cancelled = waits.add("m1"), waits.add("m2"), waits.add("m3")
        waits.drop(dropped)
        waits.drop(dropped)
        cancelled.cancelled = True
        waits.idle()
        assert refused.done.result() == NOT_STARTED and stop_reason(NOT_STARTED) is None
        assert stop_reason(cancelled.done.result()) == "cancelled" and not dropped.done.done()
        assert stop_reason({"kind": "completed"}) == "end_turn"


class TestProgress:
    def test_sent_only_when_changed_and_a_failing_source_is_skipped(self) -> None:
        board = [ProgressItem("task-1 a", "pending")]

        def broken(host: Any, root: Any) -> Any:
            raise RuntimeError("boom")

        progress = Progress(None, None, [("broken", broken), ("none", lambda h, r: None),
                                         ("board", lambda h, r: board)])
        first = progress.update()
        assert [(e.content, e.status) for e in first.entries] == [("task-1 a", "pending")]
        assert progress.update() is None
        board[0] = ProgressItem("task-1 a", "completed")
        assert progress.update().entries[0].status == "completed"
        assert Progress(None, None, []).update() is None


class TestPromptBlocks:
    def test_text_links_and_embedded_text(self) -> None:
        link = acp.resource_link_block("notes", "file:///w/notes.md")
        embedded = acp.resource_block(acp.embedded_text_resource("file:///w/a.py", "print(1)"))
        blocks = prompt_blocks([acp.text_block("look at"), link, embedded])
        texts = [b["text"] for b in blocks]
        assert texts[:2] == ["look at", "@file:///w/notes.md"]
        assert '<context uri="file:///w/a.py">' in texts[2] and "print(1)" in texts[2]

    def test_binary_and_empty_prompts_are_refused(self) -> None:
        blob = acp.resource_block(acp.embedded_blob_resource("file:///w/x.bin", "AAAA"))
        with pytest.raises(acp.RequestError, match="Invalid params"):
            prompt_blocks([blob])
        with pytest.raises(acp.RequestError):
            prompt_blocks([])




class TestUpdateSender:
    async def test_in_order_a_failed_send_is_survived_and_drained_marks_what_came_before(self) -> None:
        sent: list[Any] = []

        async def send(session_id: str, update: Any) -> None:
            if update == "broken":
                raise ConnectionError("the editor went away")
            sent.append((session_id, update))

        sender = UpdateSender(send)
        sender.session_id = "session-1"
        task = asyncio.ensure_future(sender.run())
        try:
            board = [ProgressItem("task-1 a", "pending")]
            sender.progress = Progress(None, None, [("board", lambda h, r: board)])
            sender.put("one")
            sender.put("broken")
            sender.progress_changed()
            sender.progress_changed()  # one ask queued at a time
            sender.put("two")
            await sender.drained()
        finally:
            task.cancel()
        assert [u if isinstance(u, str) else u.session_update for _, u in sent] == ["one", "plan", "two"]
        assert {session for session, _ in sent} == {"session-1"}


class TestPermissionAsks:
    def test_an_asked_mark_shows_the_call_waiting_an_allowed_one_nothing(self) -> None:
        asked = _event(TOOL_PERMISSION, {"call_id": "c1", "phase": "asked", "rule": "bash(echo *)"})
        (update,) = event_updates("builder", "child-1", asked, lead=False, replay=True)
        assert update.tool_call_id == "child-1:c1" and update.status == "pending"
        assert update.content[0].content.text == 'waiting for permission (rule "bash(echo *)")'
        allowed = _event(TOOL_PERMISSION, {"call_id": "c1", "phase": "allowed", "ask_id": "ask-1", "by": "user"})
        assert event_updates("builder", "child-1", allowed, lead=False) == []

    def test_an_ask_names_the_call_the_editor_shows(self) -> None:
        assert ask_call_id("child-1/3/2/builder-3.1") == "child-1:builder-3.1"
        assert ask_call_id("child-1/3/2/odd/id") == "child-1:odd/id"

    def test_the_title_names_member_tool_argument_and_rule(self) -> None:
        @attrs.frozen
        class Request:
            ask_id: str = "ask-1"
            key: str = "s/1/1/c"
            member: str = "builder"
            tool: str = "bash"
            arguments: str = '{"command": "echo  hi"}'
            rule: str = "bash(echo *)"
            always_rule: str = ""

        @attrs.frozen
        class Ask:
            request: Request = Request()
            open: bool = True

        assert ask_title(Ask()) == 'builder: bash echo hi (rule "bash(echo *)")'
        assert ask_title(Ask(Request(tool="odd", arguments="not json"))) == 'builder: odd (rule "bash(echo *)")'
        assert [(o.option_id, o.kind) for o in OPTIONS] == [
            ("allow-once", "allow_once"), ("allow-always", "allow_always"), ("reject-once", "reject_once")]
