"""Roster rows, member identity, name rules and interrupt, on a real host with JSONL logs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dsh_team.errors import TeamError
from dsh_team.roster.roster import MemberView, validate_name
from host_spec.messages import text_block, user_message

from roster_kit import (
    BLOCK,
    Gates,
    lead,
    open_team,
    parked_team,
    pending_ids,
    spawn,
    stored,
    team_types,
    teams_of,
    until,
    until_released,
)
from team_host import add_member

INVALID_NAMES = ["Lead", "lead", "-bad", "bad-", "bad_name", "x" * 65, "", "a--b", "ünï", 5, None]


def rows(views: list[MemberView]) -> list[tuple[Any, ...]]:
    return [(view.name, view.role, view.status, view.context) for view in views]


class TestListMembers:
    async def test_an_existing_root_lists_only_itself(self, tmp_path: Path) -> None:
        """The Lead row comes first, inactive between turns, with empty diagnostics and no model (case 3)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        (row,) = teams_of(host).list_members(root)
        assert row == MemberView(id="lead", name="lead", role="lead", status="inactive", diagnostics=())
        await add_member(host, root, "child-x", "pending", "provisioning")
        pending = teams_of(host).list_members(root)[1]
        assert (pending.status, pending.model, pending.diagnostics) == ("provisioning", None, ())
        await host.close()

    async def test_fresh_and_fork_teammates_with_immutable_names_and_a_bounded_roster(self, tmp_path: Path) -> None:
        """Fork children are seeded, fresh ones are not; the limit and name reuse are refused (case 4)."""
        host = await open_team(tmp_path, {"lead": [{"text": "one"}]}, {"max_members": 2})
        root = await lead(host)
        root.followup(user_message("warm up"))
        await root.when_idle()  # a completed turn: the fork has a prefix to inherit
        fork = await spawn(host, root, "fork-worker", context="fork")
        fresh = await spawn(host, root, "fresh-worker")
        await host.quiesce()
        assert host.store.read(fork.id)[0].seed_length > 0 and host.store.read(fresh.id)[0].seed_length == 0
        teams = teams_of(host)
        assert rows(teams.list_members(root)) == [
            ("lead", "lead", "inactive", None),
            ("fork-worker", "teammate", "inactive", "fork"),
            ("fresh-worker", "teammate", "inactive", "fresh"),
        ]
        before = root.session.last_seq
        for name, code in (("third", "TEAM_MEMBER_LIMIT"), ("fresh-worker", "TEAM_MEMBER_NAME_TAKEN")):
            with pytest.raises(TeamError) as caught:
                await spawn(host, root, name)
            assert caught.value.code == code
        assert root.session.last_seq == before
        await host.close()

    async def test_live_status_and_model_come_from_the_loaded_agents(self, tmp_path: Path) -> None:
        """A parked teammate is running; asleep on disk it is inactive and shows the Lead's model."""
        gates = Gates()
        host = await open_team(tmp_path, {"worker": [{"text": "park", "tool_calls": [BLOCK]}]}, gates=gates)
        session = await host.create_session("lead")
        root = host.start_agent(session, name="lead", model="lead-model")
        view = await spawn(host, root, "worker")
        assert (view.status, view.model) == ("running", "lead-model")  # the live child's model
        await gates.parked("worker")
        teams = teams_of(host)
        assert rows(teams.list_members(root))[1][2] == "running"
        gates.open("worker")
        await until_released(host, view.id)
        worker = teams.list_members(root)[1]
        assert (worker.status, worker.model) == ("inactive", "lead-model")  # the Lead's, as a fallback
        await host.close()

    async def test_failed_members_show_their_error(self, tmp_path: Path) -> None:
        """A failed provisioning stays on the roster with its error as the diagnostic."""
        host = await open_team(tmp_path)
        root = await lead(host)
        with pytest.raises(Exception):
            await spawn(host, root, "ghost", provider="missing")
        failed = teams_of(host).list_members(root)[1]
        assert (failed.status, failed.provider) == ("failed", "missing")
        assert len(failed.diagnostics) == 1 and "missing" in failed.diagnostics[0]
        await host.close()


class TestIdentity:
    async def test_stale_and_copied_handles_are_refused_without_a_trace(self, tmp_path: Path) -> None:
        """A copied agent object is no member for any roster or mailbox operation (case 15)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        await spawn(host, root, "worker")
        await host.quiesce()
        teams = teams_of(host)
        stale = copy.copy(root)
        before = root.session.last_seq
        calls = [
            lambda: teams.list_members(stale),
            lambda: teams.interrupt(stale, "worker"),
        ]
        for call in calls:
            with pytest.raises(TeamError) as caught:
                call()
            assert caught.value.code == "TEAM_NOT_MEMBER"
        for coro in (spawn(host, stale, "other"), teams.send_message(stale, target="worker", content=[text_block("x")])):
            with pytest.raises(TeamError) as caught:
                await coro
            assert caught.value.code == "TEAM_NOT_MEMBER"
        assert root.session.last_seq == before
        await host.close()

    async def test_non_team_children_are_not_members(self, tmp_path: Path) -> None:
        """An ordinary continuable child of the Lead has no Team; a parentless-by-id child leads its own."""
        gates = Gates()
        host = await open_team(tmp_path, {"helper": [{"text": "park", "tool_calls": [BLOCK]}]}, gates=gates)
        root = await lead(host)
        child_id = host.continuations.new_child_id()
        await host.continuations.start_continuable(
            child_id=child_id, provider="spawn", label="helper", prompt=[text_block("x")], parent=root
        )
        await gates.parked("helper")
        teams = teams_of(host)
        assert teams.try_membership(host.agents.get(child_id)) is None
        orphan = host.start_agent(await host.create_session("orphan", parent_session="gone"), name="orphan")
        assert teams.membership(orphan).role == "lead"
        assert [row.name for row in teams.list_members(root)] == ["lead"]
        gates.open("helper")
        await host.close()

    async def test_an_orphaned_provider_child_is_no_team_root(self, tmp_path: Path) -> None:
        """A rostered teammate resumed without its live Lead is nobody, not a nested Lead (case 16)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        worker = await spawn(host, root, "worker")
        await host.close()
        again = await open_team(tmp_path)
        resumed = again.start_agent(await again.resume_session(worker.id), name="worker", source="resume")
        assert teams_of(again).try_membership(resumed) is None
        await again.close()

    async def test_a_child_of_a_corrupt_team_stays_a_member_and_hears_of_the_failure(self, tmp_path: Path) -> None:
        """A failed Team stream keeps its last valid roster: the child is still a member, and reads fail loudly with the seq."""
        host = await open_team(tmp_path)
        root = await lead(host)
        worker = await spawn(host, root, "worker")
        child = host.agents.get(worker.id) or host.start_agent(
            await host.resume_session(worker.id), name="worker", source="resume"
        )
        root.session.append("team/member", {"version": 2, "team_id": "lead", "member": {"bad": 1}})
        teams = teams_of(host)
        assert teams.membership(child).name == "worker"
        seq = root.session.last_seq
        for caller in (root, child):
            with pytest.raises(TeamError) as caught:
                teams.list_members(caller)
            assert caught.value.code == "TEAM_STREAM_FAILED" and caught.value.details["seq"] == seq
            assert caught.value.message.startswith(f"the Team stream failed at seq {seq}: ")
        await host.close()


class TestNames:
    @pytest.mark.parametrize("name", INVALID_NAMES)
    async def test_invalid_names_are_refused_before_anything_is_written(self, tmp_path: Path, name: Any) -> None:
        """Names are lower-kebab-case, at most 64 characters and never ``lead`` (case 12)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        with pytest.raises(TeamError) as caught:
            await teams_of(host).spawn_teammate(
                root, name=name, description="d", prompt=[text_block("p")], context="fresh", provider="spawn"
            )
        assert caught.value.code == "TEAM_INVALID_MEMBER_NAME"
        assert team_types(root.session.events) == [] and len(host.sessions.list()) == 1
        await host.close()

    def test_valid_names_pass_unchanged(self) -> None:
        """The longest legal name and digit-only names are accepted as given."""
        assert validate_name("a" * 64) == "a" * 64
        assert validate_name("9-lives-2") == "9-lives-2"

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("description", "   "),
            ("description", "d" * 201),
            ("description", None),
            ("provider", " "),
            ("context", "sideways"),
            ("prompt", []),
            ("prompt", "text, not blocks"),
            ("prompt", [{"text": "no type"}]),
            ("prompt", [{"type": "text", "text": 5}]),  # a malformed core block: refused before provisioning
            ("prompt", [{"type": "text", "text": float("nan")}]),  # not lossless JSON
        ],
    )
    async def test_blank_or_malformed_fields_are_refused(self, tmp_path: Path, field: str, value: Any) -> None:
        """Description and provider are trimmed and required; context and prompt are checked (case 13)."""
        host = await open_team(tmp_path)
        root = await lead(host)
        request: dict[str, Any] = {
            "name": "worker", "description": "d", "prompt": [text_block("p")], "context": "fresh", "provider": "spawn",
        }  # fmt: skip
        request[field] = value
        with pytest.raises(TeamError) as caught:
            await teams_of(host).spawn_teammate(root, **request)
        assert caught.value.code == "TEAM_INVALID_ARGUMENT"
        assert team_types(root.session.events) == []
        await host.close()


class TestInterrupt:
    async def test_interrupt_cancels_only_the_current_turn_and_keeps_the_inbox(self, tmp_path: Path) -> None:
        """Previous status ``running``; the worker goes idle; an accepted message stays pending (cases 12, 35)."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        sent = await teams.send_message(root, target="worker", content=[text_block("later")])
        assert sent.status == "accepted"
        assert teams.interrupt(root, " worker ").previous_status == "running"
        worker = host.agents.get(worker.id)
        await worker.when_idle()
        assert worker.status == "idle" and [m.id for m in worker.inbox.next_step] == [sent.message_id]
        assert teams.interrupt(root, "worker").previous_status == "inactive"  # loaded, idle: nothing to cancel
        assert teams.journals.get(root.session).state.mail.is_delivered(sent.message_id)
        await host.close()
        assert sent.message_id in pending_ids(stored(tmp_path, worker.id))

    async def test_interrupting_a_teammate_on_disk_is_a_no_op(self, tmp_path: Path) -> None:
        """A teammate that is not loaded reports ``inactive`` and nothing is written anywhere."""
        host = await open_team(tmp_path)
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until_released(host, view.id)
        before = root.session.last_seq
        assert teams_of(host).interrupt(root, "worker").previous_status == "inactive"
        assert root.session.last_seq == before and host.sessions.get(view.id) is None
        await host.close()

    async def test_interrupt_is_lead_only_and_needs_an_active_other_member(self, tmp_path: Path) -> None:
        """Teammates get LEAD_REQUIRED; ``lead`` is INVALID_TARGET; unknown or unsettled names are not found."""
        gates = Gates()
        host = await open_team(tmp_path, {"worker": [{"text": "park", "tool_calls": [BLOCK]}]}, gates=gates)
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await add_member(host, root, "child-p", "pending", "provisioning")
        await add_member(host, root, "child-f", "broken", "failed")
        teams = teams_of(host)
        worker = host.agents.get(view.id)
        cases = [
            (worker, "lead", "TEAM_LEAD_REQUIRED"),
            (root, "lead", "TEAM_INVALID_TARGET"),
            (root, "nobody", "TEAM_MEMBER_NOT_FOUND"),
            (root, "pending", "TEAM_MEMBER_NOT_FOUND"),
            (root, "broken", "TEAM_MEMBER_NOT_FOUND"),
            (root, 7, "TEAM_INVALID_ARGUMENT"),
        ]
        for caller, target, code in cases:
            with pytest.raises(TeamError) as caught:
                teams.interrupt(caller, target)
            assert caught.value.code == code, (target, caught.value)
        gates.open("worker")
        await host.close()


class TestTeammateCalls:
    async def test_a_teammate_cannot_create_teammates(self, tmp_path: Path) -> None:
        """Spawning is Lead-only; the refused call writes nothing (case 12)."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        before = (root.session.last_seq, worker.session.last_seq)
        with pytest.raises(TeamError) as caught:
            await spawn(host, worker, "nested")
        assert caught.value.code == "TEAM_LEAD_REQUIRED"
        assert (root.session.last_seq, worker.session.last_seq) == before
        rows_seen = teams_of(host).list_members(worker)
        assert [row.name for row in rows_seen] == ["lead", "worker"]
        gates.open("worker")
        await until(lambda: host.sessions.get(worker.id) is None, what="release")
        await host.close()

