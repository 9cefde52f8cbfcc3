"""Permission asks in a live Team: the chat's ``/permit``, session rules, the feed and who may answer.

A real host with the agent-teams profile plus a ``[permissions]`` table; the
scripted Lead calls ``list_agents``, which the profile asks about (no workspace
needed). The test answers from ``dsh chat``'s ``/permit`` command, the way the
person at the terminal does, while the Lead's turn waits on the ask.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from dsh_team.errors import TeamCode, TeamError
from dsh_team.permissions import AnsweredRecord, PermissionRoutes
from host_spec.errors import InvariantError
from dsh_team.views.chat import commands
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.messages import user_message
from host_spec.records import CancelCause
from host_spec.permissions import PermissionRouter
from kit_waits import until
from roster_kit import lead, spawn, teams_of


@attrs.define
class Context:
    host: Any
    root: Any
    lines: list[str] = attrs.Factory(list)

    def write(self, line: str) -> None:
        self.lines.append(line)


async def permit(context: Context, argument: str = "") -> list[str]:
    context.lines.clear()
    [command] = [c for c in commands() if c.name == "permit"]
    result = command.run(context, argument)
    if result is not None:
        await result
    return list(context.lines)


LIST = {"name": "list_agents", "arguments": {}}


async def open_host(tmp_path: Path, script: dict[str, Any], **permissions: Any) -> Host:
    lines = ['extends = "agent-teams"', "[permissions]"]
    lines += [f"{key} = {value!r}".replace("'", '"') for key, value in permissions.items()]
    profile = tmp_path / "p.toml"
    profile.write_text("\n".join(lines) + "\n")
    return await Host.open(tmp_path / "data", str(profile), ScriptedModel.from_mapping(script))


async def test_the_user_answers_from_chat_and_always_makes_a_session_rule(tmp_path: Path) -> None:
    script = {"lead": [{"text": "one", "tool_calls": [LIST]}, {"text": "two", "tool_calls": [LIST]}, {"text": "ok"}]}
    host = await open_host(tmp_path, script, default="allow", ask=["list_agents"])
    heard: list[tuple[str, str, bool]] = []
    try:
        root = await lead(host)
        routes = host.service(PermissionRouter)
        assert isinstance(routes, PermissionRoutes)
        routes.listen(lambda team, ask: heard.append((team, ask.request.ask_id, ask.open)))

        def broken(team: str, ask: Any) -> None:
            raise RuntimeError("a broken listener")

        routes.listen(broken)  # contained: the ask goes on
        context = Context(host, root)
        assert await permit(context) == ["  (no open permission asks)"]
        root.followup(user_message("go"))
        await until(lambda: heard, what="the Lead's ask on the feed")  # announced once durable
        [line] = await permit(context)
        assert line.startswith("  ask-1 lead: list_agents {} (rule list_agents)")
        assert await permit(context, "ask-1 always fine by me") == ["(ask-1 allow always by the user)"]
        with pytest.raises(TeamError) as again:
            await permit(context, "ask-1 deny")
        assert again.value.code == TeamCode.PERMISSION_ALREADY_ANSWERED
        with pytest.raises(TeamError) as usage:
            await permit(context, "ask-1")
        assert usage.value.code == TeamCode.INVALID_ARGUMENT
        await root.when_idle()
        state = teams_of(host).permissions_state(root)
        with pytest.raises(InvariantError) as vetoed:  # a second answer never reaches the log, however written
            root.session.append("permission/answered", AnsweredRecord(
                version=1, team_id="lead", ask_id="ask-1", decision="deny", by="user"))
        assert "answered twice" in vetoed.value.message
    finally:
        await host.close()
    [ask] = state.listed()  # the second call ran on the session rule: no second ask
    assert ask.answer is not None and (ask.answer.by, ask.answer.always, ask.answer.reason) == ("user", True, "fine by me")
    assert dict(state.always) == {"lead": ("list_agents",)}
    assert heard == [("lead", "ask-1", True), ("lead", "ask-1", False)]
    results = [e.value() for e in root.session.events if e.type == "tool/result"]
    assert [r.get("is_error", False) for r in results] == [False, False]


async def test_only_the_lead_answers_and_only_what_is_delegated(tmp_path: Path) -> None:
    script = {"lead": [{"text": "one", "tool_calls": [LIST]}, {"text": "ok"}],
              "alice": [{"text": "asks too", "tool_calls": [LIST]}, {"text": "hi"}]}
    host = await open_host(tmp_path, script, default="allow", ask=["list_agents"])
    try:
        root = await lead(host)
        alice = await spawn(host, root, "alice")
        service = teams_of(host)
        root.followup(user_message("go"))
        await until(lambda: len(service.permissions_state(root).open_asks()) == 2, what="both asks")
        ids = {ask.request.member: ask.request.ask_id for ask in service.permissions_state(root).open_asks()}
        member = host.agents.get(alice.id)
        codes = []
        for caller, by, answer in ((root, "lead", "allow"), (member, "lead", "allow"), (root, "user", "maybe"),
                                   (root, "user", 7)):
            with pytest.raises(TeamError) as refused:
                await service.answer_permission(caller, ask_id=ids["lead"], answer=answer, by=by)
            codes.append(refused.value.code)
        with pytest.raises(TeamError) as missing:
            await service.answer_permission(root, ask_id="ask-9", answer="deny", by="user")
        with pytest.raises(TeamError) as long:
            await service.answer_permission(root, ask_id=ids["lead"], answer="deny", reason="x" * 3000, by="user")
        await service.answer_permission(root, ask_id=ids["lead"], answer="deny", reason="no", by="user")
        await service.answer_permission(root, ask_id=ids["alice"], answer="allow", by="user")
        await root.when_idle()
    finally:
        await host.close()
    assert codes == [TeamCode.PERMISSION_NOT_DELEGATED, TeamCode.LEAD_REQUIRED, TeamCode.INVALID_ARGUMENT,
                     TeamCode.INVALID_ARGUMENT]
    assert (missing.value.code, long.value.code) == (TeamCode.PERMISSION_NOT_FOUND, TeamCode.INVALID_ARGUMENT)
    [result] = [e.value() for e in root.session.events if e.type == "tool/result"]
    assert result["error"]["code"] == "PERMISSION_DENIED" and "denied by user: no" in result["error"]["message"]


async def test_an_interrupted_ask_runs_nothing_and_a_later_answer_is_recorded(tmp_path: Path) -> None:
    half = {"name": "send_message", "arguments": {"target": "lead", "message": "m", "permission": "ask-1"}}
    script = {"lead": [{"text": "one", "tool_calls": [LIST]}, {"text": "half", "tool_calls": [half]}, {"text": "ok"}]}
    host = await open_host(tmp_path, script, default="allow", ask=["list_agents"])
    try:
        root = await lead(host)
        routes = host.service(PermissionRouter)
        assert isinstance(routes, PermissionRoutes)
        root.followup(user_message("go"))
        await until(lambda: routes.open_asks(root), what="the Lead's ask")
        root.cancel(CancelCause("user"))
        await root.when_idle()
        [result] = [e.value() for e in root.session.events if e.type == "tool/result"]
        assert result["error"]["code"] == "ABORTED"
        [ask] = routes.open_asks(root)  # the ask stays on record; nobody waits for it now
        answered = await teams_of(host).answer_permission(root, ask_id="ask-1", answer="allow", by="user")
        assert answered.answer is not None and routes.open_asks(root) == ()
        root.followup(user_message("again"))  # the next turn: a permission without its answer
        await root.when_idle()
        results = [e.value() for e in root.session.events if e.type == "tool/result"]
    finally:
        await host.close()
    assert results[-1]["error"]["code"] == "INVALID_ARGS" and "both permission and answer" in results[-1]["error"]["message"]


def test_without_a_team_an_ask_is_denied_at_once(tmp_path: Path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text('extends = "headless"\n[permissions]\ndefault = "ask"\n')
    script = tmp_path / "s.json"
    script.write_text('{"lead": [{"text": "x", "tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]}]}')
    (tmp_path / "ws").mkdir()
    from host_spec.host.cli.main import main

    assert main(["run", "--profile", str(profile), "--model", f"scripted:{script}", "--data-dir",
                 str(tmp_path / "data"), "--workspace", str(tmp_path / "ws"), "go"]) == 0  # fmt: skip
    from host_spec.host.store.jsonl import JsonlStore

    events = JsonlStore(tmp_path / "data").read("session-1")[1]
    [result] = [e.value() for e in events if e.type == "tool/result"]
    assert result["error"]["code"] == "PERMISSION_DENIED" and "no one can answer" in result["error"]["message"]
    assert not [e for e in events if e.type == "tool/permission"]  # nothing was asked
