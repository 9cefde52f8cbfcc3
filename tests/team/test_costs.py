"""Cost per member and per task: the ledger fold, the attribution rule and the live service.

The oracle of the rule is :func:`naive_charges`: it replays the whole history of
task snapshots before each model call (no incremental state) and charges the
call to the first task in creation order that the caller owned in progress, else
to the caller. The live service, driven through real sessions and the real task
board over random interleavings, must agree with it; and the Lead log folded
offline (what ``dsh team show`` reads) must agree with the live ledger.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog

from dsh_team.core.fold import replay
from dsh_team.cost import CostLedger, MemberCost, Spend, call_spend, fold_cost, replay_costs, spend_after
from dsh_team.cost.records import COST_VERSION, TEAM_BUDGET, TEAM_COST
from dsh_team.cost.report import build_report
from dsh_team.errors import TeamError
from dsh_team.views.show import build_show
from dsh_team.views.show_text import render_text
from host_spec.events import EventType, SubagentDescriptor
from host_spec.host.cli.main import main
from host_spec.host.store.jsonl import JsonlStore

from host_spec import hookimpl
from host_spec.records import Violation
from roster_kit import faulty_log, history_ids, lead, of_type, open_team, pending_ids, resume_lead, spawn, stored
from structlog.testing import capture_logs
from team_builders import TEAM, Log, event
from team_host import open_host, service, team

USAGE_STEP = {"turn": 1, "step": 1, "content": [{"type": "text", "text": "x"}]}


@pytest.fixture(autouse=True)
def _logging() -> Any:
    """``main()`` configures structlog for the process; undo it for the tests that follow."""
    yield
    structlog.reset_defaults()


async def show(tmp_path: Path, *options: str) -> int:
    """``dsh team show`` of the Lead ``lead`` (its own event loop, in a thread)."""
    return await asyncio.to_thread(main, ["team", "show", *options, "--data-dir", str(tmp_path / "data"), "lead"])


def charge(member_id: str, seq: int, calls: int = 1, tokens: tuple[int, int] = (10, 1), **extra: Any) -> dict[str, Any]:
    spend = {"calls": calls, "input_tokens": tokens[0], "output_tokens": tokens[1], "cached_tokens": 0}
    return {"version": COST_VERSION, "team_id": TEAM, "member_id": member_id, "seq": seq, "spend": spend, **extra}


def reached(kind: str = "tokens", value: int = 10, **extra: Any) -> dict[str, Any]:
    return {"version": COST_VERSION, "team_id": TEAM, "kind": kind, "value": value, "used": value + 1, **extra}


def fold(*payloads: tuple[str, Any]) -> CostLedger:
    return replay_costs([event(i, kind, body) for i, (kind, body) in enumerate(payloads, 1)], TEAM)


class TestLedger:
    def test_charges_split_between_tasks_and_the_member(self) -> None:
        """A member's total is its task charges plus its own; the Team sums every member."""
        ledger = fold(
            (TEAM_COST, charge("m1", 3, tokens=(100, 5))),
            (TEAM_COST, charge("m1", 7, tokens=(50, 2), task_id="task-1")),
            (TEAM_COST, charge("m2", 2, calls=2, tokens=(30, 3), task_id="task-1")),
            ("team/task", {"not": "a cost record"}),
        )
        assert ledger.failure is None and ledger.last_charged("m1") == 7 and ledger.last_charged("zz") == 0
        assert ledger.member("m1") == Spend(2, 150, 7) and ledger.own["m1"] == Spend(1, 100, 5)
        assert ledger.task("task-1") == Spend(3, 80, 5) and ledger.team == Spend(4, 180, 10)
        assert ledger.member("m1").tokens == 157 and ledger.member("nobody") == Spend()

    @pytest.mark.parametrize(
        ("payloads", "failure"),
        [
            ([(TEAM_COST, charge("m1", 3)), (TEAM_COST, charge("m1", 3))], "seq 2: a charge of m1 does not advance past seq 3"),
            ([(TEAM_COST, {**charge("m1", 3), "extra": 1})], "seq 1: invalid team/cost payload"),
            ([(TEAM_COST, {**charge("m1", 3), "version": 2})], "seq 1: unsupported team/cost version 2"),
            ([(TEAM_BUDGET, reached()), (TEAM_BUDGET, reached())], "seq 2: the tokens limit 10 was reached twice"),
            ([(TEAM_BUDGET, {**reached(), "kind": "dollars"})], "seq 1: invalid team/budget payload"),
        ],
    )  # fmt: skip
    def test_a_broken_record_fails_the_ledger_loudly(self, payloads: list[tuple[str, Any]], failure: str) -> None:
        """Repeated, malformed and unknown-version records stop the ledger; its totals stay the last valid ones."""
        ledger = fold(*payloads)
        assert ledger.failure is not None and ledger.failure.startswith(failure)
        assert fold(*payloads, (TEAM_COST, charge("m9", 99))).member("m9") == Spend()  # terminal

    def test_other_teams_and_limits_per_value(self) -> None:
        """Records of another Team are ignored; one limit may be reached again at a new value."""
        ledger = fold(
            (TEAM_COST, {**charge("m1", 3), "team_id": "other"}),
            (TEAM_BUDGET, reached(value=10, member_id="m1")),
            (TEAM_BUDGET, reached(value=20, member_id="m1")),
            (TEAM_BUDGET, reached(value=10)),
        )
        assert ledger.failure is None and ledger.team == Spend()
        assert [(seq, r.member_id, r.value) for seq, r in ledger.reached] == [(2, "m1", 10), (3, "m1", 20), (4, None, 10)]

    def test_call_spend_reads_only_reported_usage(self) -> None:
        """Only an assistant reply with usage is a charged call; ``spend_after`` skips what was charged."""
        events = [
            event(1, EventType.ASSISTANT_MESSAGE, {**USAGE_STEP, "usage": {"input_tokens": 9, "output_tokens": 1}}),
            event(2, EventType.ASSISTANT_MESSAGE, USAGE_STEP),
            event(3, EventType.USER_MESSAGE, {"usage": {"input_tokens": 5}}),
            event(4, EventType.ASSISTANT_MESSAGE, {**USAGE_STEP, "usage": {"input_tokens": 4, "cached_tokens": 3}}),
            event(5, EventType.ASSISTANT_MESSAGE, {**USAGE_STEP, "usage": {"input_tokens": "many"}}),
        ]
        assert [call_spend(e) for e in events] == [Spend(1, 9, 1), None, None, Spend(1, 4, 0, 3), None]
        summary = event(6, EventType.CONTEXT_COMPACTED, {"summary": "s", "usage": {"input_tokens": 50, "output_tokens": 5}})
        assert call_spend(summary) == Spend(1, 50, 5)  # a compaction's summary call is spend too
        assert spend_after(events, 0) == (Spend(2, 13, 1, 3), 4)
        assert spend_after(events, 1) == (Spend(1, 4, 0, 3), 4) and spend_after(events, 4) == (Spend(), 0)

    def test_fold_keeps_the_same_ledger_for_foreign_events(self) -> None:
        """A non-cost event returns the very same ledger object (the panel's change test relies on it)."""
        ledger = CostLedger(TEAM)
        assert fold_cost(ledger, event(1, EventType.ASSISTANT_MESSAGE, USAGE_STEP)) is ledger


# ---------------------------------------------------------------- the oracle


def naive_charges(history: list[tuple[Any, ...]]) -> dict[tuple[str, str | None], Spend]:
    """``(member, task or None) -> spend`` by replaying the whole history before every call."""
    totals: dict[tuple[str, str | None], Spend] = {}
    for index, item in enumerate(history):
        if item[0] != "call":
            continue
        _, member_id, spend = item
        latest: dict[str, tuple[str, str | None]] = {}
        created: list[str] = []
        for earlier in history[:index]:
            if earlier[0] == "task":
                _, task_id, status, owner = earlier
                if task_id not in latest:
                    created.append(task_id)
                latest[task_id] = (status, owner)
        owned = [t for t in created if latest[t] == ("in_progress", member_id)]
        key = (member_id, owned[0] if owned else None)
        old = totals.get(key, Spend())
        totals[key] = Spend(old.calls + 1, old.input_tokens + spend.input_tokens, old.output_tokens + spend.output_tokens)
    return totals


def ledger_charges(ledger: CostLedger, member_ids: list[str], task_ids: list[str], events: list[Any]) -> dict[tuple[str, str | None], Spend]:
    """The same ``(member, task)`` view from the Lead log's charge records."""
    found: dict[tuple[str, str | None], Spend] = {}
    for item in events:
        if item.type == TEAM_COST:
            record = item.value()
            key = (record["member_id"], record.get("task_id"))
            spend = Spend(**record["spend"])
            old = found.get(key, Spend())
            found[key] = Spend(old.calls + spend.calls, old.input_tokens + spend.input_tokens,
                               old.output_tokens + spend.output_tokens)
    assert sum(s.calls for s in found.values()) == ledger.team.calls
    for member_id in member_ids:
        mine = [s for (m, _), s in found.items() if m == member_id]
        assert ledger.member(member_id).calls == sum(s.calls for s in mine)
    for task_id in task_ids:
        assert ledger.task(task_id).tokens == sum(s.tokens for (_, t), s in found.items() if t == task_id)
    return found


async def random_run(tmp_path: Path, seed: int, steps: int = 60) -> tuple[Any, list[tuple[Any, ...]], Any, list[str]]:
    """Drive a Lead and two teammates through random board moves and model calls; return the history."""
    rng = random.Random(seed)
    host = await open_host(tmp_path / "data")
    root, members = await team(host, "alpha", "beta")
    teams = service(host)
    agents = [root, *members]
    names = {root.id: "lead", members[0].id: "alpha", members[1].id: "beta"}
    history: list[tuple[Any, ...]] = []
    tasks: dict[str, Any] = {}
    for _ in range(steps):
        move = rng.random()
        try:
            if move < 0.15 or not tasks:
                view = await teams.create_task(root, subject="work", description="d")
            else:
                task_id = rng.choice(sorted(tasks))
                current = teams.get_task(root, task_id)
                actor = rng.choice(agents)
                action = rng.choice(["claim", "claim", "complete", "release", "reassign", "reopen"])
                extra = {"owner": names[rng.choice(agents).id]} if action == "reassign" else {}
                view = await teams.update_task(
                    actor, task_id=task_id, expected_revision=current.revision, action=action, **extra
                )
            tasks[view.id] = view
            history.append(("task", view.id, view.status, view.owner_id))
        except TeamError:
            pass
        for _ in range(rng.randrange(3)):
            agent = rng.choice(agents)
            spend = Spend(1, rng.randrange(1, 500), rng.randrange(0, 50))
            usage = {"input_tokens": spend.input_tokens, "output_tokens": spend.output_tokens}
            agent.session.append(EventType.ASSISTANT_MESSAGE, {**USAGE_STEP, "usage": usage})
            history.append(("call", agent.id, spend))
    await host.quiesce()
    return host, history, teams, sorted(tasks)


@pytest.mark.timeout_s(180)
@pytest.mark.parametrize("seed", range(6))
async def test_attribution_matches_the_naive_oracle(tmp_path: Path, seed: int) -> None:
    """Live charges equal the oracle's, and the Lead file folded offline equals the live ledger."""
    host, history, teams, task_ids = await random_run(tmp_path, seed)
    try:
        root = host.agents.get("lead")
        journal = teams.journals.get(root.session)
        live = teams.costs.ledger(journal)
        member_ids = ["lead", "child-1", "child-2"]
        lead_events = list(root.session.events)
        assert ledger_charges(live, member_ids, task_ids, lead_events) == naive_charges(history)
        assert live.team.calls == sum(1 for item in history if item[0] == "call")
        rows = teams.member_costs(root)
        assert {m: rows[m].spend for m in rows} == {m: live.member(m) for m in member_ids if live.member(m).calls}
    finally:
        await host.close()
    stored = JsonlStore(tmp_path / "data").read("lead")[1]
    assert replay_costs(stored, "lead") == live  # what dsh team show folds is what the service folded


async def test_team_show_agrees_with_the_live_service(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``dsh team show --json`` prints the live report: members, tasks and nothing uncharged."""
    host, history, teams, _ = await random_run(tmp_path, seed=11, steps=30)
    try:
        root = host.agents.get("lead")
        journal = teams.journals.get(root.session)
        live = msgspec.json.decode(msgspec.json.encode(build_report(journal.state, teams.costs.ledger(journal))))
    finally:
        await host.close()
    capsys.readouterr()  # the host's own log lines
    assert await show(tmp_path, "--json") == 0
    shown = msgspec.json.decode(capsys.readouterr().out)["costs"]
    zero = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
    assert [m.pop("uncharged") for m in shown["members"]] == [zero, zero, zero]
    for member in live["members"]:
        member.pop("uncharged")
    assert shown == live and shown["team"]["calls"] == sum(1 for item in history if item[0] == "call")
    assert await show(tmp_path) == 0
    text = capsys.readouterr().out
    assert f"Cost: {shown['team']['input_tokens'] + shown['team']['output_tokens']} tokens" in text


async def test_lost_charges_are_rebuilt_once_when_the_member_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Spend a crash left uncharged is charged once at the member's next start, to the task it owns then."""
    host = await open_host(tmp_path / "data")
    root, _ = await team(host)
    teams = service(host)
    view = await teams.create_task(root, subject="s", description="d")
    await teams.update_task(root, task_id=view.id, expected_revision=1, action="claim")
    await host.close()
    # What a crash leaves: the Lead's own calls are in its log, their charges never were.
    store = JsonlStore(tmp_path / "data")
    header, events = store.read("lead")
    from host_spec.host.store.sessions import SessionStore
    from host_spec.host.store.session import NullObserver

    sessions = SessionStore(store, NullObserver())
    lead_session = sessions.resume("lead")
    for tokens in (30, 12):
        lead_session.append(EventType.ASSISTANT_MESSAGE, {**USAGE_STEP, "usage": {"input_tokens": tokens, "output_tokens": 1}})
    await sessions.dispose(lead_session)
    capsys.readouterr()
    assert await show(tmp_path, "--json") == 0
    uncharged = msgspec.json.decode(capsys.readouterr().out)["costs"]["members"][0]["uncharged"]
    assert uncharged == {"calls": 2, "input_tokens": 42, "output_tokens": 2, "cached_tokens": 0}
    for _ in range(2):  # a second start finds nothing left to charge
        host = await open_host(tmp_path / "data")
        session = await host.resume_session("lead")
        host.start_agent(session, name="lead", source="resume")
        await host.quiesce()
        await host.close()
    ledger = replay_costs(JsonlStore(tmp_path / "data").read("lead")[1], "lead")
    assert ledger.member("lead") == Spend(2, 42, 2) == ledger.task(view.id) and ledger.failure is None
    assert sum(1 for e in JsonlStore(tmp_path / "data").read("lead")[1] if e.type == TEAM_COST) == 1


def reply(tokens: int) -> dict[str, Any]:
    return {**USAGE_STEP, "usage": {"input_tokens": tokens, "output_tokens": 0}}


class VetoCosts:
    """Vetoes every ``team/cost`` append (a seam of the host contract: the pre-append veto)."""

    @hookimpl
    def dsh_pre_append(self, host: Any, session: Any, event: Any) -> Violation | None:
        return Violation("no charges here", rule="test") if event.type == TEAM_COST else None


class TestLiveEdges:
    async def test_only_live_members_with_usage_are_charged(self, tmp_path: Path) -> None:
        """A reply without usage, a session with no agent and a stale session object charge nothing."""
        host = await open_host(tmp_path / "data")
        try:
            root, (worker,) = await team(host, "worker")
            loose = await host.create_session("loose")  # no agent: no member
            loose.append(EventType.ASSISTANT_MESSAGE, reply(5))
            root.session.append(EventType.ASSISTANT_MESSAGE, USAGE_STEP)
            worker.session.append(EventType.ASSISTANT_MESSAGE, reply(7))
            await host.quiesce()
            teams = service(host)
            ledger = teams.costs.ledger(teams.journals.get(root.session))
            assert ledger.team == Spend(1, 7, 0) and ledger.member(worker.id) == Spend(1, 7, 0)
        finally:
            await host.close()

    async def test_a_described_child_without_a_team_is_no_member(self, tmp_path: Path) -> None:
        """An orphaned subagent: its start, its model calls and its budget checks touch no ledger."""
        host = await open_host(tmp_path / "data", {"budget": {"team_calls": 1}})
        try:
            orphan_session = await host.create_session("orphan", parent_session="gone")
            orphan_session.append("subagent/descriptor", SubagentDescriptor(version=2, mode="continuable", provider="spawn"))
            orphan = host.start_agent(orphan_session, name="orphan")
            for _ in range(2):
                orphan.session.append(EventType.ASSISTANT_MESSAGE, reply(3))
            service(host).costs.agent_pre_step(orphan)  # no Team: no limit applies
            await host.quiesce()
            assert TEAM_COST not in [e.type for e in orphan.session.events]
        finally:
            await host.close()

    async def test_pending_charges_are_counted_per_member(self, tmp_path: Path) -> None:
        """Two members' charges pending at once: each row gets its own, the Team both."""
        host = await open_host(tmp_path / "data", {"budget": {"team_tokens": 100}})
        try:
            root, (alpha, beta) = await team(host, "alpha", "beta")
            teams = service(host)
            alpha.session.append(EventType.ASSISTANT_MESSAGE, reply(30))
            beta.session.append(EventType.ASSISTANT_MESSAGE, reply(40))
            rows = teams.member_costs(root)
            assert (rows[alpha.id].spend.tokens, rows[beta.id].spend.tokens) == (30, 40)
            teams.costs.agent_pre_step(alpha)  # 70 of 100 for the Team
            for member in (alpha, beta):
                await member.session.flush()  # the members' logs hold the calls: now they are charged
            await host.dispose_agent(root)  # the Lead leaves: its ledger is forgotten with its session
        finally:
            await host.close()
        assert replay_costs(stored(tmp_path, "lead"), "lead").team.tokens == 70

    async def test_a_malformed_charge_fails_the_ledger_once(self, tmp_path: Path) -> None:
        """The live ledger stops at a broken record, logs it once, and keeps answering with the last totals."""
        host = await open_host(tmp_path / "data")
        try:
            root, (worker,) = await team(host, "worker")
            worker.session.append(EventType.ASSISTANT_MESSAGE, reply(7))
            await host.quiesce()
            with capture_logs() as logs:
                root.session.append(TEAM_COST, {"version": 1})
                worker.session.append(EventType.ASSISTANT_MESSAGE, reply(9))
                await host.quiesce()
                rows = service(host).member_costs(root)
            assert [entry["event"] for entry in logs].count("team.cost_ledger_failed") == 1
            assert rows[worker.id].spend == Spend(1, 7, 0)  # the later charge is not folded
        finally:
            await host.close()

    async def test_a_refused_charge_is_rebuilt_at_the_next_start(self, tmp_path: Path) -> None:
        """When the Lead log refuses a charge it is logged and left to the rebuild: charged once, later."""
        host = await open_team(tmp_path, {}, plugins=[VetoCosts()])
        try:
            root = await lead(host)
            with capture_logs() as logs:
                root.session.append(EventType.ASSISTANT_MESSAGE, reply(11))
                await host.quiesce()
            assert "team.cost_write_failed" in [entry["event"] for entry in logs]
        finally:
            await host.close()
        host = await open_team(tmp_path, {})
        try:
            await resume_lead(host)
            await host.quiesce()
        finally:
            await host.close()
        assert replay_costs(stored(tmp_path, "lead"), "lead").member("lead") == Spend(1, 11, 0)

    async def test_a_failed_flush_keeps_the_charge_for_the_next_one(self, tmp_path: Path) -> None:
        """The charge stays appended when its flush fails (logged); the next flush stores it."""
        host = await open_host(tmp_path / "data")
        try:
            root, (worker,) = await team(host, "worker")
            faulty_log(root.session, fail_at=[1])
            with capture_logs() as logs:
                worker.session.append(EventType.ASSISTANT_MESSAGE, reply(13))
                await worker.session.flush()  # durable in the worker's log: charged, and the Lead log flushed
                await host.quiesce()
            assert "team.cost_flush_failed" in [entry["event"] for entry in logs]
        finally:
            await host.close()
        assert replay_costs(stored(tmp_path, "lead"), "lead").member("child-1") == Spend(1, 13, 0)

    async def test_the_leads_own_limit_refuses_the_lead(self, tmp_path: Path) -> None:
        """The Lead is a member too: at its limit its next model call is refused and it is told about itself."""
        host = await open_team(tmp_path, {}, {"budget": {"member_calls": 2}})
        try:
            root = await lead(host)
            for _ in range(2):
                root.session.append(EventType.ASSISTANT_MESSAGE, reply(1))
            await host.quiesce()
            events = list(root.session.events)
            (notice,) = [v for v in of_type(events, EventType.INBOX_SPLICED) for v in v["inserted"]]
            assert notice["content"][0]["text"].startswith("Team budget: Member lead reached its calls limit (2 of 2)")
            assert not of_type(events, EventType.TURN_START)  # the notice woke it; the turn was refused
            assert await spawn(host, root, "helper")  # a member limit leaves spawns alone
        finally:
            await host.close()

    async def test_the_check_counts_charges_not_appended_yet(self, tmp_path: Path) -> None:
        """Right after a reply (its charge waits for the member's flush) the next call is already refused."""
        host = await open_host(tmp_path / "data", {"budget": {"member_tokens": 10}})
        try:
            root, (worker,) = await team(host, "worker")
            teams = service(host)
            worker.session.append(EventType.ASSISTANT_MESSAGE, reply(6))
            teams.costs.agent_pre_step(worker)  # 6 of 10: allowed
            worker.session.append(EventType.ASSISTANT_MESSAGE, reply(6))
            assert teams.member_costs(root)[worker.id] == MemberCost(Spend(2, 12, 0), exceeded=True)
            with pytest.raises(TeamError) as caught:
                teams.costs.agent_pre_step(worker)  # nothing appended yet, and still refused
            assert caught.value.code == "TEAM_BUDGET_EXCEEDED" and caught.value.details["used"] == 12
            assert TEAM_COST not in [e.type for e in root.session.events]  # the worker's log does not hold them yet
            await worker.session.flush()
            types = [e.type for e in root.session.events]
            assert types.count(TEAM_COST) == 2 and types.count(TEAM_BUDGET) == 1
            await host.quiesce()
            assert [e.type for e in root.session.events].count(TEAM_COST) == 2
        finally:
            await host.close()

    async def test_an_event_observed_twice_is_charged_once(self, tmp_path: Path) -> None:
        """A charge must advance its member's seq, so a repeated observation appends nothing."""
        host = await open_host(tmp_path / "data")
        try:
            root, (worker,) = await team(host, "worker")
            teams = service(host)
            worker.session.append(EventType.ASSISTANT_MESSAGE, reply(6))
            await host.quiesce()
            teams.costs.session_event(worker.session, worker.session.events[-1])
            assert teams.member_costs(root)[worker.id].spend == Spend(1, 6, 0)  # the pending copy is not counted
            await host.quiesce()
            ledger = teams.costs.ledger(teams.journals.get(root.session))
            assert ledger.member(worker.id) == Spend(1, 6, 0) and ledger.failure is None
        finally:
            await host.close()

    async def test_a_lowered_limit_is_recorded_and_told_when_the_lead_starts(self, tmp_path: Path) -> None:
        """Spend already above a newly configured limit: recorded without a live Lead, told once it starts."""
        host = await open_host(tmp_path / "data")
        root = await lead(host)
        for _ in range(2):
            root.session.append(EventType.ASSISTANT_MESSAGE, reply(1))
        await host.quiesce()
        await host.close()
        host = await open_host(tmp_path / "data", {"budget": {"member_calls": 1}})
        try:
            session = await host.resume_session("lead")
            teams = service(host)
            assert teams.costs.write(teams.journals.get(session))  # the record; no live Lead to tell yet
            assert notices_held(list(session.events)) == []
            host.start_agent(session, name="lead", source="resume")
            await host.quiesce()
            assert len(notices_held(list(session.events))) == 1
        finally:
            await host.close()


def notices_held(events: list[Any]) -> list[str]:
    return [i for i in history_ids(events) + pending_ids(events) if i.startswith("budget-")]


class TestDeletedTaskSubjects:
    def test_a_deleted_tasks_subject_is_read_from_its_deleting_record(self) -> None:
        """The board keeps a tombstone; with the Lead log the report names the subject the task had."""
        log = Log()
        log.task("task-1", subject="parse the input")
        log.task("task-1", 2, status="deleted", subject="parse the input")
        log.add(TEAM_COST, charge(TEAM, 1, tokens=(7, 1), task_id="task-1"))
        state, ledger = log.fold(), replay_costs(log.events, TEAM)
        assert build_report(state, ledger, events=log.events).tasks[0].subject == "parse the input"
        assert build_report(state, ledger).tasks[0].subject == ""  # the tombstone alone


class TestShowText:
    def test_the_cost_line_names_failures_deleted_tasks_uncharged_spend_and_limits(self) -> None:
        """Every part of the ``Cost:`` block, rendered from one report."""
        ledger = fold(
            (TEAM_COST, charge(TEAM, 3, tokens=(100, 5), task_id="task-9")),
            (TEAM_BUDGET, reached(value=50, member_id=TEAM)),
            (TEAM_BUDGET, reached(value=70)),
            (TEAM_COST, {"version": 1}),
        )
        state = replay([], TEAM)
        report = build_report(state, ledger, {TEAM: Spend(1, 8, 1)})
        show = build_show(state, session_id=TEAM, log_length=4, at=4, costs=report)
        text = render_text(show)
        assert "Cost: 105 tokens in 1 model calls (105 charged to tasks, the rest to members)" in text
        assert "  FAILURE (cost ledger): seq 4: invalid team/cost payload" in text
        assert "    lead: 9 tokens in 1 calls not charged yet (charged at its next start)" in text
        assert "    task-9 (deleted): 105 tokens" in text
        assert "    budget reached at seq 2: lead tokens 51 of 50" in text
        assert "    budget reached at seq 3: the Team tokens 71 of 70" in text
        assert "Cost:" not in render_text(build_show(state, session_id=TEAM, log_length=4, at=4))


async def test_a_call_is_charged_only_once_its_members_log_holds_it(tmp_path: Path) -> None:
    """No charge names a call a crash could take back: it waits for the member's flush; a lost call is never charged."""
    host = await open_host(tmp_path / "data")
    try:
        root, (kept, lost) = await team(host, "kept", "lost")
        teams = service(host)
        for member in (kept, lost):
            member.session.append(EventType.ASSISTANT_MESSAGE, reply(5))
        await asyncio.sleep(0)
        assert TEAM_COST not in [e.type for e in root.session.events]  # neither log holds its call yet
        await kept.session.flush()
        await host.discard_session(lost.session)  # gone without its final flush: its call never happened
        await root.session.flush()
        ledger = teams.costs.ledger(teams.journals.get(root.session))
        assert ledger.member(kept.id) == Spend(1, 5, 0) and ledger.member(lost.id) == Spend()
        assert teams.member_costs(root).keys() == {kept.id}
    finally:
        await host.close()


async def test_a_rebuilt_charge_outlives_its_members_departure(tmp_path: Path) -> None:
    """Durable spend rebuilt at a member's start is still charged when the member leaves before the write."""
    host = await open_host(tmp_path / "data")
    root, (worker,) = await team(host, "worker")
    worker.session.append(EventType.ASSISTANT_MESSAGE, reply(8))
    await worker.session.flush()
    await host.close()
    from host_spec.host.store.session import NullObserver
    from host_spec.host.store.sessions import SessionStore

    sessions = SessionStore(JsonlStore(tmp_path / "data"), NullObserver())
    stored_worker = sessions.resume("child-1")  # a call whose charge a crash lost
    stored_worker.append(EventType.ASSISTANT_MESSAGE, reply(21))
    await sessions.dispose(stored_worker)
    host = await open_host(tmp_path / "data")
    try:
        await resume_lead(host)
        session = await host.resume_session("child-1")
        host.start_agent(session, name="worker", source="resume")  # the rebuild is queued, its write scheduled
        await host.discard_session(session)  # the member leaves first
        await host.quiesce()
    finally:
        await host.close()
    ledger = replay_costs(stored(tmp_path, "lead"), "lead")
    assert ledger.member("child-1") == Spend(2, 29, 0) and ledger.failure is None
