"""The legacy delegation plugins end to end: subagent, subagent_fork, send_message, interrupt_agent, list_agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _subagent_kit import BLOCK, Gates, open_host, start_root, stored, user_texts
from host_spec import hookimpl
from host_spec.errors import ConfigError
from host_spec.events import EventType
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.plugins.profiles import load_profile
from host_spec.messages import text_block, user_message


def tool_results(session: Any, name: str) -> list[dict[str, Any]]:
    """Decoded tool results of ``name`` in ``session``: the JSON value, or the error dict."""
    found = []
    for event in session.events:
        if event.type == EventType.TOOL_RESULT and event.value()["name"] == name:
            value = event.value()
            found.append(value["error"] if value.get("is_error") else json.loads(value["content"][0]["text"]))
    return found


class ResidencyProbe:
    """Records, when each subagent result is committed, whether its child is still loaded."""

    def __init__(self) -> None:
        self.loaded_at_result: list[bool] = []

    @hookimpl
    def dsh_session_event(self, host: Any, session: Any, event: Any) -> None:
        if event.type == EventType.TOOL_RESULT and event.value()["name"] in ("subagent", "subagent_fork"):
            value = event.value()
            if not value.get("is_error"):
                child_id = json.loads(value["content"][0]["text"])["subagent_id"]
                self.loaded_at_result.append(host.agents.get(child_id) is not None)


class TestDelegationTools:
    async def test_subagent_returns_the_answer_and_the_child_is_on_disk(self, tmp_path: Path) -> None:
        """The tool result carries the child's final text; by then the child has been released."""
        probe = ResidencyProbe()
        script = {
            "lead": [{"tool_calls": [{"name": "subagent", "arguments": {"description": "helper", "prompt": "add 2+2"}}]},
                     {"text": "lead done"}],
            "helper": [{"when": "add 2+2", "text": "it is 4"}],
        }
        host = await open_host(tmp_path, script, profile="headless", plugins=(("probe", probe),))
        try:
            root = await host.run("go")
            (result,) = tool_results(root.session, "subagent")
        finally:
            await host.close()
        assert (result["status"], result["output"]) == ("completed", "it is 4")
        header, events = stored(tmp_path, result["subagent_id"])
        assert header.parent_session == root.id and user_texts(events) == ["add 2+2"]
        assert probe.loaded_at_result == [False]
        assert [e for e in root.session.events if e.type == EventType.USER_MESSAGE][-1].value()["source"] == {
            "kind": "user"
        }  # a one-shot answer comes back as the tool result, not as a notice

    async def test_subagent_fork_sees_the_callers_completed_turns(self, tmp_path: Path) -> None:
        """The forked child answers from the parent's earlier turn; both tools can run in one step."""
        script = {
            "lead": [
                {"text": "the code word is heron"},
                {"tool_calls": [
                    {"name": "subagent_fork", "arguments": {"description": "forker", "prompt": "what was the word?"}},
                    {"name": "subagent", "arguments": {"description": "fresh", "prompt": "what was the word?"}},
                ]},
                {"text": "done"},
            ],
            "forker": [{"when": "heron", "text": "the word was heron"}],
            "fresh": [{"when": "heron", "text": "heron?"}],
        }
        host = await open_host(tmp_path, script, profile="headless")
        try:
            root = await host.run("remember a word")
            root.followup(user_message("now ask"))
            await host.quiesce()
            forked = tool_results(root.session, "subagent_fork")
            fresh = tool_results(root.session, "subagent")
        finally:
            await host.close()
        assert forked[0]["output"] == "the word was heron"
        assert fresh[0]["output"] == "(waiting)"  # a fresh child never saw the word
        assert stored(tmp_path, forked[0]["subagent_id"])[0].seed_length > 0
        assert stored(tmp_path, fresh[0]["subagent_id"])[0].seed_length == 0

    async def test_depth_limit_is_a_tool_error(self, tmp_path: Path) -> None:
        """Past max_depth the tool fails with MAX_DEPTH; the turn goes on."""
        profile = tmp_path / "shallow.toml"
        profile.write_text('extends = "headless"\n[plugins.subagent]\nmax_depth = 1\n')
        script = {
            "lead": [{"tool_calls": [{"name": "subagent", "arguments": {"description": "kid", "prompt": "go deeper"}}]}],
            "kid": [{"tool_calls": [{"name": "subagent", "arguments": {"description": "grandkid", "prompt": "x"}}]},
                    {"text": "could not"}],
        }
        host = await open_host(tmp_path, script, profile=profile)
        try:
            root = await host.run("go")
            (result,) = tool_results(root.session, "subagent")
        finally:
            await host.close()
        kid = stored(tmp_path, result["subagent_id"])[1]
        errors = [e.value()["error"]["code"] for e in kid if e.type == EventType.TOOL_RESULT]
        assert errors == ["MAX_DEPTH"] and result["output"] == "could not"


class TestControlTools:
    async def test_send_message_by_label_wakes_the_child_from_disk(self, tmp_path: Path) -> None:
        """send_message addresses a sleeping child by its description; the answer returns as a notice."""
        script = {
            "lead": [
                {"tool_calls": [{"name": "subagent", "arguments": {"description": "helper", "prompt": "first"}}]},
                {"tool_calls": [{"name": "send_message", "arguments": {"agent_id": "helper", "message": "second"}}]},
                {"tool_calls": [{"name": "list_agents", "arguments": {}}]},
                {"when": "answer two", "text": "got both"},
            ],
            "helper": [{"text": "answer one"}, {"when": "second", "text": "answer two"}],
        }
        host = await open_host(tmp_path, script, profile="headless")
        try:
            root = await host.run("go")
            sent = tool_results(root.session, "send_message")
            listed = tool_results(root.session, "list_agents")
            child_id = tool_results(root.session, "subagent")[0]["subagent_id"]
        finally:
            await host.close()
        assert sent[0]["agent_id"] == child_id
        rows = listed[0]["agents"]
        assert [(r["agent_id"], r["description"], r["provider"]) for r in rows] == [(child_id, "helper", "spawn")]
        assert rows[0]["status"] in ("running", "idle", "ready")
        messages = [e.value() for e in stored(tmp_path, child_id)[1] if e.type == EventType.USER_MESSAGE]
        assert messages[1]["source"] == {"kind": "coordinator", "form": "relay", "sender_session_id": root.id}
        assert [r.reply["text"] for r in host.model.requests if r.agent_id == root.id][-1] == "got both"

    async def test_list_agents_finds_children_stored_by_an_earlier_process(self, tmp_path: Path) -> None:
        """A fresh host lists the root's stored children as ready, discovered from their logs."""
        script = {"lead": [{"tool_calls": [{"name": "subagent", "arguments": {"description": "old", "prompt": "x"}}]},
                           {"tool_calls": [{"name": "list_agents", "arguments": {}}]}],
                  "old": [{"text": "ok"}]}

        host = await open_host(tmp_path, {"lead": script["lead"][:1], "old": script["old"]}, profile="headless")
        try:
            root = await host.run("go")
        finally:
            await host.close()
        host = await open_host(tmp_path, script, profile="headless")
        try:
            await host.resume_session(root.id)
            session = host.sessions.get(root.id)
            resumed = host.start_agent(session, name="lead", source="resume")
            resumed.followup(user_message("list"))
            await host.quiesce()
            listed = tool_results(resumed.session, "list_agents")
        finally:
            await host.close()
        assert [(r["description"], r["status"]) for r in listed[0]["agents"]] == [("old", "ready")]

    async def test_control_errors_are_tool_results(self, tmp_path: Path) -> None:
        """Unknown or ambiguous targets come back as coded tool errors; interrupting an absent target is a no-op."""
        script = {
            "lead": [
                {"tool_calls": [{"name": "subagent", "arguments": {"description": "twin", "prompt": "a"}}]},
                {"tool_calls": [{"name": "subagent", "arguments": {"description": "twin", "prompt": "b"}}]},
                {"tool_calls": [{"name": "send_message", "arguments": {"agent_id": "twin", "message": "?"}}]},
                {"tool_calls": [{"name": "send_message", "arguments": {"agent_id": "nobody", "message": "?"}}]},
                {"tool_calls": [{"name": "interrupt_agent", "arguments": {"agent_id": "nobody"}}]},
                {"text": "done"},
            ],
            "twin": [{"text": "here"}, {"text": "here too"}],
        }
        host = await open_host(tmp_path, script, profile="headless")
        try:
            root = await host.run("go")
            sent = tool_results(root.session, "send_message")
            interrupted = tool_results(root.session, "interrupt_agent")
        finally:
            await host.close()
        assert [s["code"] for s in sent] == ["AMBIGUOUS_AGENT", "NOT_RESUMABLE"]
        assert interrupted == [{"accepted": True}]  # an absent target is a no-op

    async def test_interrupt_agent_stops_a_running_child(self, tmp_path: Path) -> None:
        """interrupt_agent cancels the child's turn; the subagent call then reports it aborted."""
        gates = Gates()
        script = {"lead": [{"tool_calls": [{"name": "interrupt_agent", "arguments": {"agent_id": "busy"}}]}],
                  "busy": [{"tool_calls": [BLOCK]}]}
        host = await open_host(tmp_path, script, profile="headless", plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = host.continuations.new_child_id()

            await host.continuations.start_continuable(
                child_id=child_id, provider="spawn", label="busy", prompt=[text_block("work")], parent=root, notify=False
            )
            await gates.parked("busy")
            root.followup(user_message("stop it"))
            await host.quiesce()
            assert tool_results(root.session, "interrupt_agent") == [{"accepted": True}]
        finally:
            await host.close()
        kid = stored(tmp_path, child_id)[1]
        assert [e.value()["reason"]["kind"] for e in kid if e.type == EventType.TURN_END] == ["aborted"]


class TestProfiles:
    @pytest.mark.parametrize(
        ("disable", "absent"),
        [
            (["subagent-fork"], {"subagent_fork"}),
            (["subagent"], {"subagent"}),
            (["subagent-control"], {"send_message", "interrupt_agent", "list_agents"}),
            (["subagent", "subagent-fork", "subagent-control"],
             {"subagent", "subagent_fork", "send_message", "interrupt_agent", "list_agents"}),
        ],
    )
    async def test_disabling_a_legacy_plugin_removes_its_tools(self, tmp_path: Path, disable: list[str], absent: set[str]) -> None:
        """A profile that disables a legacy entry loses exactly that entry's tools; spawn/fork stay registered."""
        everything = {"subagent", "subagent_fork", "send_message", "interrupt_agent", "list_agents"}
        profile = tmp_path / "p.toml"
        profile.write_text(f'extends = "headless"\ndisable = {json.dumps(disable)}\n')
        host = await open_host(tmp_path, {}, profile=profile)
        try:
            root = await start_root(host)
            names = {spec.name for spec in host.tools.visible(root)}
            assert names & everything == everything - absent
            assert {"spawn", "fork"} <= set(host.continuations.provider_names())
        finally:
            await host.close()

    def test_agent_teams_profile_disables_all_legacy_tools(self) -> None:
        """The built-in agent-teams profile lists no legacy delegation plugin."""
        names = {entry.name for entry in load_profile("agent-teams").plugins}
        assert not names & {"subagent", "subagent-fork", "subagent-control"}

    async def test_a_host_without_continuations_registers_no_legacy_tools(self) -> None:
        """With continuations switched off, the plugins load but offer nothing."""
        host = Host(store=None, model=ScriptedModel.from_mapping({}))
        host.continuations = None
        try:
            for name in ("subagent", "subagent-fork", "subagent-control"):
                host.plugins.load(name, {})
            assert host.tools.visible(None) == []
        finally:
            await host.close()

    async def test_bad_plugin_config_names_the_field(self, tmp_path: Path) -> None:
        """An unknown key or a bad max_depth fails the load with the field path."""
        for table, needle in (("max_depht = 2", "max_depht"), ("max_depth = 0", "max_depth")):
            profile = tmp_path / "bad.toml"
            profile.write_text(f'extends = "headless"\n[plugins.subagent]\n{table}\n')
            with pytest.raises(ConfigError) as excinfo:
                await open_host(tmp_path, {}, profile=profile)
            assert needle in str(excinfo.value) and "plugins.subagent" in str(excinfo.value)
