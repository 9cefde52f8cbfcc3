"""The Team's ``dsh chat`` commands against a real host: ``/team`` reads the live Team, ``/send`` reaches a member."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from dsh_team.errors import TeamError
from dsh_team.views.chat import USER_FRAME, board_lines, commands
from host_spec.chat import ChatCommand
from host_spec.errors import ServiceNotFoundError, SubagentError
from host_spec.events import EventType
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from roster_kit import lead, open_team, spawn, stored, teams_of, until_released, user_texts
from team_host import add_member


@attrs.define
class Context:
    """What ``dsh chat`` hands a command (``host_spec.chat.ChatContext``)."""

    host: Any
    root: Any
    lines: list[str] = attrs.Factory(list)

    def write(self, line: str) -> None:
        self.lines.append(line)


def by_name() -> dict[str, ChatCommand]:
    return {command.name: command for command in commands()}


async def run(context: Context, name: str, argument: str = "") -> list[str]:
    context.lines.clear()
    result = by_name()[name].run(context, argument)
    if result is not None:
        await result
    return list(context.lines)


class TestTeam:
    async def test_shows_the_live_roster_and_board(self, tmp_path: Path) -> None:
        host = await open_team(tmp_path, {"alice": [{"text": "on it"}]})
        try:
            root = await lead(host)
            await spawn(host, root, "alice")
            await until_released(host, teams_of(host).list_members(root)[1].id)
            first = await teams_of(host).create_task(root, subject="write intro", description="d")
            await teams_of(host).create_task(root, subject="write outro", description="d", blocked_by=[first.id])
            with pytest.raises(SubagentError):
                await spawn(host, root, "ghost", provider="missing")  # a failed member keeps its diagnostics
            lines = await run(Context(host, root), "team")
        finally:
            await host.close()
        assert lines[0] == "members:" and lines[1].split()[:2] == ["lead", "inactive"]
        assert lines[2].split()[:2] == ["alice", "inactive"]
        assert lines[3].split()[:2] == ["ghost", "failed"] and "failed: " in lines[3]
        assert lines[4] == "tasks:"
        assert lines[5].split()[1:] == ["pending", "-", "write", "intro"]
        assert lines[6].endswith(f"write outro  blocked by {first.id}")

    def test_mail_counts_and_an_empty_board(self) -> None:
        from dsh_team.roster.roster import MemberView

        row = MemberView(id="m", name="bob", role="teammate", status="running", model="llm:x", pending=2, unread=1)
        assert board_lines([row], []) == ["members:", "  bob          running      llm:x  (2 pending, 1 unread)",
                                          "tasks:", "  (none)"]

    async def test_without_the_team_plugin_the_lookup_error_is_typed(self, tmp_path: Path) -> None:
        host = await Host.open(tmp_path / "data", None, ScriptedModel.from_mapping({}))
        try:
            root = await lead(host)
            with pytest.raises(ServiceNotFoundError):
                await run(Context(host, root), "team")
        finally:
            await host.close()


class TestSend:
    async def test_a_sleeping_member_is_woken_with_the_users_message(self, tmp_path: Path) -> None:
        host = await open_team(tmp_path, {"alice": [{"text": "first"}, {"text": "heard you"}]})
        try:
            root = await lead(host)
            await spawn(host, root, "alice")
            alice = teams_of(host).list_members(root)[1].id
            await until_released(host, alice)
            lines = await run(Context(host, root), "send", "alice  please report")
            await host.quiesce()
            lead_events = list(root.session.events)
        finally:
            await host.close()
        assert lines == ["(sent to alice)"]
        events = stored(tmp_path, alice)
        assert user_texts(events)[-1] == f"{USER_FRAME}please report"
        sent = [e.value() for e in events if e.type == EventType.USER_MESSAGE][-1]
        assert sent["source"] == {"kind": "user"}  # the user speaking, not a Team message from the Lead
        assert [e.value()["content"][0]["text"] for e in events if e.type == EventType.ASSISTANT_MESSAGE][-1] == "heard you"
        assert not [e for e in lead_events if e.type == "team/message/queued"]  # no Team mailbox involved

    async def test_to_the_lead_it_is_a_typed_line(self, tmp_path: Path) -> None:
        host = await open_team(tmp_path, {"lead": [{"text": "got it"}]})
        try:
            root = await lead(host)
            lines = await run(Context(host, root), "send", "lead hello there")
            await host.quiesce()
            events = list(root.session.events)
        finally:
            await host.close()
        assert lines == ["(sent to lead)"]
        assert user_texts(events) == ["hello there"]

    @pytest.mark.parametrize(("argument", "code"), [
        ("", "TEAM_INVALID_ARGUMENT"),
        ("alice", "TEAM_INVALID_ARGUMENT"),
        ("nobody hi", "TEAM_MEMBER_NOT_FOUND"),
        ("gone hi", "TEAM_INVALID_TARGET"),
    ])
    async def test_bad_requests_are_typed_and_deliver_nothing(self, tmp_path: Path, argument: str, code: str) -> None:
        host = await open_team(tmp_path)
        try:
            root = await lead(host)
            await add_member(host, root, "child-gone", "gone", phase="failed")
            with pytest.raises(TeamError) as caught:
                await run(Context(host, root), "send", argument)
            assert caught.value.code == code
            assert root.inbox.has_pending() is False
        finally:
            await host.close()
        if code == "TEAM_MEMBER_NOT_FOUND":
            assert "members: gone, lead" in caught.value.message
