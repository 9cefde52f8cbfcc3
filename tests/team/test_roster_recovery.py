"""Recovery reconciliation over JSONL logs: open provisioning records settled from the child's own log (§5.5)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from dsh_team.core.records import TEAM_MEMBER
from dsh_team.roster.reconcile import MISMATCH, reconcile
from host_spec.events import EventType, InboxSplice, SubagentDescriptor
from host_spec.messages import text_block, user_message

from roster_kit import (
    lead,
    member_phases,
    open_team,
    pending_ids,
    resume_lead,
    stored,
    stored_team,
    team_types,
    teams_of,
    user_texts,
)
from team_host import add_member

PROMPT = user_message("initial task", id="prompt-1")


async def stored_child(
    host: Any,
    child_id: str,
    *,
    parent: str | None = "lead",
    descriptor: SubagentDescriptor | None = SubagentDescriptor(
        version=2, mode="continuable", provider="spawn", label="worker", name="worker"
    ),
    prompt: Any = PROMPT,
    claimed: bool = False,
) -> None:
    """Write a child log the way a crashed creation could have left it, then detach it."""
    session = await host.create_session(child_id, parent_session=parent, origin="subagent")
    if descriptor is not None:
        session.append(EventType.SUBAGENT_DESCRIPTOR, descriptor)
    if prompt is not None:
        session.append(EventType.INBOX_SPLICED, InboxSplice(target="next-turn", inserted=[_item(prompt)]))
        if claimed:
            session.append(EventType.INBOX_SPLICED, InboxSplice(target="next-turn", removed_ids=[prompt.id], outcome="claimed"))
            session.append(EventType.USER_MESSAGE, prompt)
    session.append("test/marker", {})  # every child has at least one durable line
    await host.release_session(session)


def _item(message: Any) -> dict[str, Any]:
    return {"id": message.id, "role": "user", "content": message.content, "source": message.source}


async def crashed_team(tmp_path: Path, members: dict[str, str]) -> None:
    """A first process: a Lead whose roster holds ``provisioning`` records (name -> child id), then gone."""
    host = await open_team(tmp_path)
    root = await lead(host)
    for name, child_id in members.items():
        await add_member(host, root, child_id, name, "provisioning")
    await host.close()


class TestReconcileOnLeadStart:
    async def test_a_persisted_child_becomes_active_and_a_missing_one_failed(self, tmp_path: Path) -> None:
        """After restart one member is active, the other failed; the recovered one takes mail (12.2 case 1)."""
        await crashed_team(tmp_path, {"worker": "child-a", "ghost": "child-b"})
        host = await open_team(tmp_path, {"worker": [{"text": "on it"}, {"when": "status?", "text": "fine"}]})
        await stored_child(host, "child-a", claimed=True)
        root = await resume_lead(host)
        teams = teams_of(host)
        await host.quiesce()  # recovery is host-tracked work
        state = teams.journals.get(root.session).state
        assert member_phases(state) == {"worker": "active", "ghost": "failed"}
        ghost = state.members.by_name("ghost")
        assert ghost is not None and (ghost.error or "").startswith("child Session recovery failed: ")
        sent = await teams.send_message(root, target="worker", content=[text_block("status?")])
        assert sent.status == "accepted"
        await host.quiesce()
        await host.close()
        assert member_phases(stored_team(tmp_path)) == {"worker": "active", "ghost": "failed"}
        assert stored_team(tmp_path).mail.is_delivered(sent.message_id)
        assert "status?" in user_texts(stored(tmp_path, "child-a"))[-1]

    async def test_a_pending_initial_prompt_proves_the_creation_without_running_the_child(self, tmp_path: Path) -> None:
        """The prompt only in the durable inbox: active, no model call, inbox intact (12.2 case 2)."""
        await crashed_team(tmp_path, {"worker": "child-a"})
        host = await open_team(tmp_path)
        await stored_child(host, "child-a")
        root = await resume_lead(host)
        await host.quiesce()
        assert member_phases(teams_of(host).journals.get(root.session).state) == {"worker": "active"}
        assert [r for r in host.model.requests if r.agent_id == "child-a"] == []
        assert host.sessions.get("child-a") is None
        await host.close()
        assert pending_ids(stored(tmp_path, "child-a")) == ["prompt-1"]

    async def test_mismatched_children_are_recorded_failed(self, tmp_path: Path) -> None:
        """No descriptor, another provider, another parent, a one-shot, or no user prompt: all failed (case 48)."""
        names = {"plain": "c-1", "other-provider": "c-2", "other-parent": "c-3", "one-shot": "c-4", "no-prompt": "c-5", "team-only": "c-6"}
        await crashed_team(tmp_path, names)
        host = await open_team(tmp_path)
        await stored_child(host, "c-1", descriptor=None)
        await stored_child(host, "c-2", descriptor=SubagentDescriptor(version=2, mode="continuable", provider="fork"))
        await stored_child(host, "c-3", parent="someone-else")
        await stored_child(host, "c-4", descriptor=SubagentDescriptor(version=2, mode="one-shot", provider="spawn"))
        await stored_child(host, "c-5", prompt=None)
        team_mail = user_message("hi", id="m-1", source={"kind": "team-message", "team_id": "lead", "message_id": "m-1"})
        await stored_child(host, "c-6", prompt=team_mail)
        root = await resume_lead(host)
        teams = teams_of(host)
        await host.quiesce()
        assert set(member_phases(teams.journals.get(root.session).state).values()) == {"failed"}
        for member in teams.journals.get(root.session).state.members.listed():
            assert member.error == MISMATCH, member.name
        await host.close()

    async def test_a_live_child_is_left_to_its_creator_and_a_settled_record_is_not_overwritten(self, tmp_path: Path) -> None:
        """Live children are skipped; a record settled while the child was read stays as it was (case 48)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        await add_member(host, root, "child-live", "busy", "provisioning")
        await add_member(host, root, "child-raced", "raced", "provisioning")
        await host.create_session("child-live", parent_session="lead")
        await stored_child(host, "child-raced")
        journal = teams_of(host).journals.get(root.session)
        settling = asyncio.ensure_future(reconcile(host, journal))
        await asyncio.sleep(0)  # it now reads the stored child (in a worker thread)
        await add_member_terminal(host, root, "child-raced", "raced", "failed")
        assert await settling == 0
        assert member_phases(journal.state) == {"busy": "provisioning", "raced": "failed"}
        assert team_types(root.session.events).count(TEAM_MEMBER) == 3
        await host.close()

    async def test_records_written_after_the_lead_started_belong_to_their_creator(self, tmp_path: Path) -> None:
        """Recovery only settles records that existed when the Lead started."""
        await crashed_team(tmp_path, {"old": "child-old"})
        host = await open_team(tmp_path)
        root = await resume_lead(host)
        await add_member(host, root, "child-new", "new", "provisioning")  # a creator of this process
        await host.quiesce()
        assert member_phases(teams_of(host).journals.get(root.session).state)["old"] == "failed"
        assert member_phases(teams_of(host).journals.get(root.session).state)["new"] == "provisioning"
        await host.close()


async def add_member_terminal(host: Any, root: Any, member_id: str, name: str, phase: str) -> None:
    from dsh_team.core.records import VERSION, MemberRecord
    from dsh_team.core.snapshots import TeamMemberSnapshot
    from dsh_team.log.journal import Append

    snapshot = TeamMemberSnapshot(id=member_id, name=name, description="worker", provider="spawn", context="fresh", phase=phase)
    record = MemberRecord(version=VERSION, team_id=root.id, member=snapshot)
    journal = teams_of(host).journals.get(root.session)
    await journal.transact(lambda state: Append(TEAM_MEMBER, record), lambda state: None, what="member")
