"""Budgets: a reached limit refuses model calls and spawns, tells the Lead once, loses nothing.

Real host, real JSONL files, real teammates answered by the scripted model (whose
steps report ``usage`` like a server would). Each scripted step without tool
calls is one turn of one model call, so every Team message a teammate gets costs
exactly its script step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_team.config import TeamConfig
from dsh_team.cost import replay_costs
from dsh_team.cost.records import TEAM_BUDGET
from dsh_team.errors import TeamConfigError, TeamError
from host_spec.events import EventType
from host_spec.messages import text_block, user_message

from roster_kit import history_ids, lead, of_type, open_team, pending_ids, resume_lead, spawn, stored, teams_of, until


def step(text: str, tokens: int) -> dict[str, Any]:
    return {"text": text, "usage": {"input_tokens": tokens, "output_tokens": 0}}


SCRIPT = {"worker": [step("one", 100), step("two", 100), step("three", 100)]}


def notices(events: list[Any]) -> list[str]:
    """Ids of the budget notices a log holds (history plus pending inbox): one entry per holding."""
    return [i for i in history_ids(events) + pending_ids(events) if i.startswith("budget-")]


async def send(host: Any, root: Any, target: str, text: str) -> str:
    result = await teams_of(host).send_message(root, target=target, content=[text_block(text)])
    return str(result.message_id)


async def over_budget(tmp_path: Path, config: dict[str, Any]) -> tuple[Any, Any, str, str]:
    """A worker (its id) that spent 200 tokens under a 150-token member limit, then got one more message."""
    host = await open_team(tmp_path, SCRIPT, {"budget": config})
    root = await lead(host)
    worker = (await spawn(host, root, "worker")).id  # it may already sleep on disk when spawn returns
    await host.quiesce()
    await send(host, root, "worker", "first job")
    await host.quiesce()
    late = await send(host, root, "worker", "second job")
    await host.quiesce()
    return host, root, worker, late


class TestConfig:
    @pytest.mark.parametrize(
        ("budget", "path", "message"),
        [
            ({"member_tokens": 1.5}, "budget.member_tokens", "expected an integer, got float"),
            ({"team_calls": True}, "budget.team_calls", "expected an integer, got bool"),
            ({"team_tokens": 0}, "budget.team_tokens", "team_tokens must be a positive safe integer or absent"),
            ({"member_calls": 2**53}, "budget.member_calls", "member_calls must be a positive safe integer or absent"),
            ({"member_token": 5}, "budget", "extra fields found (member_token)"),
            (["member_tokens"], "budget", "expected a table, got list"),
        ],
    )
    def test_bad_budget_names_the_field(self, budget: Any, path: str, message: str) -> None:
        """A wrong budget value fails the load with ``TEAM_INVALID_CONFIG`` and its dotted path."""
        with pytest.raises(TeamConfigError) as caught:
            TeamConfig.from_mapping({"budget": budget})
        assert caught.value.code == "TEAM_INVALID_CONFIG" and caught.value.path == path
        assert message in caught.value.message

    def test_limits_default_to_none(self) -> None:
        """No table, an empty one and explicit values."""
        assert TeamConfig().budget == TeamConfig.from_mapping({"budget": {}}).budget
        budget = TeamConfig.from_mapping({"budget": {"member_tokens": 5, "team_calls": 9}}).budget
        assert (budget.member_tokens, budget.member_calls, budget.team_tokens, budget.team_calls) == (5, None, None, 9)

    async def test_a_bad_budget_fails_the_plugin_load(self, tmp_path: Path) -> None:
        """Through the real loader: the Team plugin does not load and nothing is written."""
        with pytest.raises(TeamConfigError, match="budget.member_tokens"):
            await open_team(tmp_path, {}, {"budget": {"member_tokens": "lots"}})
        assert not list((tmp_path / "data").rglob("*.jsonl"))


class TestMemberLimit:
    @pytest.mark.timeout_s(120)
    async def test_reaching_it_refuses_turns_and_keeps_the_mail(self, tmp_path: Path) -> None:
        """The third message is held, not answered; the Lead is told once; the roster says over budget."""
        host, root, worker, late = await over_budget(tmp_path, {"member_tokens": 150})
        try:
            own = stored(tmp_path, worker)  # a settled teammate sleeps on disk
            replies = of_type(own, EventType.ASSISTANT_MESSAGE)
            assert [r["usage"]["input_tokens"] for r in replies] == [100, 100]  # no third model call
            assert late in pending_ids(own) and late not in history_ids(own)  # nothing lost: still pending
            lead_events = list(root.session.events)
            budgets = of_type(lead_events, TEAM_BUDGET)
            assert [(b["member_id"], b["kind"], b["value"], b["used"]) for b in budgets] == [
                (worker, "tokens", 150, 200)
            ]
            assert len(notices(lead_events)) == 1
            rows = teams_of(host).member_costs(root)
            assert rows[worker].exceeded and rows[worker].spend.tokens == 200
            assert root.id not in rows  # the scripted Lead reports no usage: nothing charged
            await send(host, root, "worker", "third job")  # refused again: no second record, no second notice
            await host.quiesce()
            assert len(of_type(list(root.session.events), TEAM_BUDGET)) == 1 and len(notices(list(root.session.events))) == 1
            assert await spawn(host, root, "helper")  # a member limit does not stop spawns
        finally:
            await host.close()

    @pytest.mark.timeout_s(180)
    async def test_raising_the_limit_and_resuming_lifts_it(self, tmp_path: Path) -> None:
        """After a restart with a higher limit the held message is answered; the old notice is not repeated."""
        host, root, worker, late = await over_budget(tmp_path, {"member_tokens": 150})
        worker_id = worker
        await host.close()
        host = await open_team(tmp_path, SCRIPT, {"budget": {"member_tokens": 1000}})
        try:
            await host.resume("lead")
            await until(lambda: len(of_type(stored(tmp_path, worker_id), EventType.ASSISTANT_MESSAGE)) == 3,
                        what="the held message to be answered")
            own = stored(tmp_path, worker_id)
            assert history_ids(own).count(late) == 1 and late not in pending_ids(own)
            lead_events = list(host.agents.get("lead").session.events)
            assert len(notices(lead_events)) == 1 and len(of_type(lead_events, TEAM_BUDGET)) == 1
            assert not teams_of(host).member_costs(host.agents.get("lead"))[worker_id].exceeded
        finally:
            await host.close()
        ledger = replay_costs(stored(tmp_path, "lead"), "lead")
        assert ledger.member(worker_id).tokens == 300 and ledger.failure is None

    async def test_a_lost_notice_is_told_at_the_next_start_only(self, tmp_path: Path) -> None:
        """A budget record whose notice the Lead does not hold is told when the Lead starts, once."""
        host = await open_team(tmp_path, {}, {"budget": {"team_tokens": 5}})
        root = await lead(host)
        journal = teams_of(host).journals.get(root.session)
        root.session.append(TEAM_BUDGET, {"version": 1, "team_id": "lead", "kind": "tokens", "value": 5, "used": 9})
        await journal.flush("budget")
        await host.close()
        for _ in range(2):
            host = await open_team(tmp_path, {}, {"budget": {"team_tokens": 5}})
            await resume_lead(host)
            await host.quiesce()
            await host.close()
        assert len(notices(stored(tmp_path, "lead"))) == 1


class TestTeamLimit:
    @pytest.mark.timeout_s(120)
    async def test_it_refuses_spawns_and_every_member(self, tmp_path: Path) -> None:
        """At the Team's call limit a spawn fails with the code and appends nothing; the Lead's turns stop too."""
        host, root, worker, late = await over_budget(tmp_path, {"team_calls": 2})
        try:
            before = len(root.session.events)
            with pytest.raises(TeamError) as caught:
                await spawn(host, root, "helper")
            assert caught.value.code == "TEAM_BUDGET_EXCEEDED" and "the Team's calls budget" in caught.value.message
            assert [e.type for e in root.session.events[before:]] == []  # nothing written for the refusal
            budgets = of_type(list(root.session.events), TEAM_BUDGET)
            assert [(b.get("member_id"), b["kind"], b["value"]) for b in budgets] == [(None, "calls", 2)]
            assert late in pending_ids(stored(tmp_path, worker))
            root.steer(user_message("carry on"))
            await host.quiesce()
            turns = of_type(list(root.session.own_events()), EventType.TURN_START)
            assert not of_type(list(root.session.own_events()), EventType.ASSISTANT_MESSAGE) and not turns
        finally:
            await host.close()
