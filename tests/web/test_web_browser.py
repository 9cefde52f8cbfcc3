"""The panel in a real headless browser (Debian's chromium via Playwright) against a real scripted Team run.

The host runs on its own loop thread (:class:`web_kit.LoopThread`); the browser is
driven from the test's thread. Every wait is on a condition in the page, with
generous bounds: nothing here measures time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kit_gates import faulty_log
from web_kit import TEAM_TOOLS, LoopThread, Team, open_team

playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = os.environ.get("DSH_CHROMIUM", "/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("DSH_TEST_ARTIFACTS", REPO / "build" / "test-artifacts"))
WAIT_MS = 30_000

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: make test installs it (.ci/system-deps), or: sudo apt-get install -y chromium")
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[LoopThread, Team]]:
    thread = LoopThread()
    team = thread.call(open_team(tmp_path / "data"))
    try:
        yield thread, team
    finally:
        thread.call(team.host.close())
        thread.stop()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1480, "height": 980})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert errors == []


def _open(page: Any, team: Team, extra: str = "") -> None:
    page.goto(team.panel.url + extra)
    page.wait_for_selector("#roster tbody tr", timeout=WAIT_MS)


def _until(page: Any, script: str, arg: Any = None) -> None:
    page.wait_for_function(script, arg=arg, timeout=WAIT_MS)


def test_the_board_updates_live_when_a_teammate_completes_a_task(live: tuple[LoopThread, Team], page: Any) -> None:
    thread, team = live
    _open(page, team)
    _until(page, "() => window.dshPanel.opens >= 1")
    task = page.locator('[data-task="task-1"]')
    assert task.get_attribute("data-status") == "in_progress"
    assert "blocked" in (page.locator('[data-task="task-2"] .meta').text_content() or "")
    # the builder idles on its claimed task: the panel shows the Team's quiescence and what stalled
    assert page.locator("#quiet-card").is_visible()
    assert page.locator("#quiet-stalled li").all_inner_texts() == ["in progress: task-1 (owner builder)"]

    thread.call(team.tell("builder", "finish now"))

    page.wait_for_selector('[data-task="task-1"][data-status="completed"]', timeout=WAIT_MS)
    _until(page, "() => document.querySelector('[data-task=\"task-2\"] .meta').textContent.includes('ready')")
    # newest first: the builder went idle leaving task-2 ready, so the Team recorded its quiescence
    _until(page, "() => document.querySelectorAll('#timeline li').length >= 2 && "
                 "document.querySelector('#timeline li').textContent.includes('Team quiescent')")
    entries = [text.split("\n") for text in page.locator("#timeline li").all_inner_texts()]
    assert "Team quiescent: 1 ready stalled" in entries[0]
    assert ["builder", "task-1 completed (rev 3)"] in [entry[1:3] for entry in entries[1:4]]
    _until(page, "() => document.querySelector('#quiet-stalled li').textContent === 'ready, unclaimed: task-2'")
    assert "nothing changed since" in page.locator("#quiet-when").inner_text()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "team-panel-live.png"), full_page=True)


def test_the_cost_card_charges_a_model_call_to_the_task_in_progress(live: tuple[LoopThread, Team], page: Any) -> None:
    """The builder's next model call is charged to task-1 (in progress by it) and the card shows it live."""
    thread, team = live
    _open(page, team)
    page.wait_for_selector("#costs-card:not([hidden])", timeout=WAIT_MS)
    before = team.service.member_costs(team.lead)[team.agent_id("builder")].spend
    assert page.inner_text('[data-cost-member="builder"] td:nth-child(2)') == str(before.calls)
    calls = int(page.inner_text('[data-cost-task="task-1"] td:nth-child(3)'))  # the builder's waits since its claim

    thread.call(team.tell("builder", "finish now"))

    _until(page, "(calls) => document.querySelector('[data-cost-task=\"task-1\"]').children[2].textContent"
                 " === String(calls + 1)", calls)
    assert page.inner_text('[data-cost-task="task-1"] td:nth-child(4)') == f"{150 * (calls + 1):,}"  # 120 in + 30 out
    assert "tokens in" in page.inner_text("#costs-total")


def test_a_stale_claim_from_the_page_shows_the_conflict_with_the_current_task(
    live: tuple[LoopThread, Team], page: Any
) -> None:
    thread, team = live
    _open(page, team)
    page.click('[data-task="task-2"]')
    assert page.inner_text("#seen-rev") == "acting on rev 1"

    async def edit_behind_the_pages_back() -> Any:
        return await team.service.update_task(
            team.lead, task_id="task-2", expected_revision=1, action="edit", subject="Write module b, v2")

    thread.call(edit_behind_the_pages_back)
    page.wait_for_selector('[data-task="task-2"][data-revision="2"]', timeout=WAIT_MS)
    page.click('#actions button[data-action="claim"]')

    result = page.locator("#result.conflict")
    result.wait_for(timeout=WAIT_MS)
    assert "task-2 is now rev 2: pending" in result.inner_text()
    assert [t.revision for t in team.service.list_tasks(team.lead) if t.id == "task-2"] == [2]


def test_a_transport_failure_is_shown_and_only_a_compare_and_set_is_retried(
    live: tuple[LoopThread, Team], page: Any
) -> None:
    thread, team = live
    _open(page, team)
    dropped: list[str] = []

    def drop_first(route: Any) -> None:
        if not dropped:
            dropped.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route(lambda url: url.endswith("/api/tasks/task-2"), drop_first)
    page.click('[data-task="task-2"]')
    page.fill("#edit-subject", "Write module b, retried")
    page.click('#actions button[data-action="edit"]')
    page.wait_for_selector('#result.ok:text("task-2 is now pending (rev 2)")', timeout=WAIT_MS)
    assert len(dropped) == 1
    assert [t.subject for t in team.service.list_tasks(team.lead) if t.id == "task-2"] == ["Write module b, retried"]

    creates: list[str] = []
    page.route(lambda url: url.endswith("/api/tasks"), lambda route: (creates.append(route.request.url), route.abort()))
    page.fill("#c-subject", "Write docs")
    page.fill("#c-description", "Docs for a and b.")
    page.click("#create button[type=submit]")
    page.wait_for_selector('#create-result.transport:text("check the board before creating it again")', timeout=WAIT_MS)
    assert len(creates) == 1 and [t.id for t in team.service.list_tasks(team.lead)] == ["task-1", "task-2"]

    page.unroute_all()
    async def fail_the_next_flush() -> None:
        faulty_log(team.lead.session, fail_at=(1,))

    thread.call(fail_the_next_flush)
    page.click("#create button[type=submit]")
    page.wait_for_selector('#create-result.unconfirmed:text("Re-read the board before retrying")', timeout=WAIT_MS)
    assert [t.id for t in team.service.list_tasks(team.lead)] == ["task-1", "task-2", "task-3"]  # once, not twice


def test_the_mode_toggle_hides_the_team_tools_at_the_next_step(live: tuple[LoopThread, Team], page: Any) -> None:
    thread, team = live
    _open(page, team)
    assert TEAM_TOOLS <= team.tools_of_last_step("lead")
    assert page.is_checked("#mode")

    page.click("#mode")
    page.wait_for_selector('#notice:text("Team mode off")', timeout=WAIT_MS)
    _until(page, "() => window.dshPanel.live.enabled === false")
    thread.call(team.tell("lead", "mode check"))

    assert not TEAM_TOOLS & team.tools_of_last_step("lead")
    assert not page.is_checked("#mode")


def test_a_reconnect_resumes_from_the_last_event_without_loss_or_duplication(
    live: tuple[LoopThread, Team], page: Any
) -> None:
    thread, team = live
    _open(page, team)
    _until(page, "() => window.dshPanel.opens === 1")
    before = page.evaluate("() => window.dshPanel.lastId")

    thread.soon(team.panel.feed.close_all)  # the server drops every stream
    _until(page, "() => window.dshPanel.opens === 2")
    thread.call(team.tell("builder", "finish now"))
    page.wait_for_selector('[data-task="task-1"][data-status="completed"]', timeout=WAIT_MS)

    shown = page.evaluate("() => window.dshPanel.live.timeline.map((e) => e.seq)")
    server = thread.call(_document(team))
    assert shown == [entry["seq"] for entry in server["timeline"]]
    assert len(set(shown)) == len(shown)
    team_ids = page.evaluate(
        "() => window.dshPanel.received.filter((r) => !r.startsWith('status')).map((r) => Number(r.split(':')[1]))")
    assert team_ids == sorted(set(team_ids)) and team_ids[0] > before


async def _document(team: Team) -> dict[str, Any]:
    doc = team.panel.feed.document()
    assert doc is not None
    return doc


def test_the_time_slider_shows_an_earlier_roster(live: tuple[LoopThread, Team], page: Any) -> None:
    thread, team = live
    _open(page, team)
    assert page.locator("#roster tbody tr").count() == 2
    first_task = thread.call(_document(team))["timeline"][0]["seq"]

    page.evaluate("(seq) => { const s = document.getElementById('at'); s.value = seq; s.dispatchEvent(new Event('change')); }",
                  first_task)
    _until(page, "(seq) => window.dshPanel.doc.at === seq", first_task)
    assert page.locator("#roster tbody tr").count() == 1
    assert page.locator("[data-task]").count() == 1
    assert page.inner_text("#at-label").startswith(f"seq {first_task} of ")

    page.click("#live")
    _until(page, "() => document.querySelectorAll('#roster tbody tr').length === 2")
    _open(page, team, f"&at={first_task}")  # the same view from the address bar
    _until(page, "(seq) => window.dshPanel.doc && window.dshPanel.doc.at === seq", first_task)
    assert page.locator("#roster tbody tr").count() == 1


def test_the_finished_demo_board_served_from_its_logs(tmp_path: Path, page: Any) -> None:
    """``make demo``'s run, opened with ``dsh team serve`` as the demo's closing lines say; screenshot saved."""
    data = tmp_path / "demo"
    demo = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "demo", str(data)],
                          capture_output=True, text=True, timeout=120, check=True)
    assert f"dsh team serve --data-dir {data}" in demo.stdout.splitlines()[-1]
    serve = subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "team", "serve", "--data-dir", str(data)],
                             stderr=subprocess.PIPE, text=True)
    try:
        assert serve.stderr is not None
        line = serve.stderr.readline()
        assert "(read-only): http://127.0.0.1:" in line
        page.goto(line.split(": ", 2)[-1].split()[-1])
        page.wait_for_selector('[data-task="task-2"][data-status="completed"]', timeout=WAIT_MS)
        assert page.locator("#roster tbody tr").count() == 3
        assert page.inner_text("#source") == "stored run · read-only"
        assert not page.is_visible("#create")
        page.click('[data-task="task-2"]')
        page.wait_for_selector('#detail-status:text("completed (rev 3)")', timeout=WAIT_MS)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "team-panel-demo.png"), full_page=True)
    finally:
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=30) == 130
    assert "dsh: interrupted" in serve.stderr.read()


def test_the_roster_counts_unread_mail_and_the_timeline_marks_each_send_with_its_status(
    live: tuple[LoopThread, Team], page: Any
) -> None:
    """A message the builder holds but has not replied to: Unread 1 and "delivered"; after its step: 0 and "read"."""
    thread, team = live
    _open(page, team)
    builder = page.locator('#roster tbody tr[data-member="builder"] td.unread')
    assert builder.inner_text() == "0"
    told = thread.call(team.hold_running("builder", "finish now"))  # its model call holds the message in context
    _until(page, "() => document.querySelector('#roster tr[data-member=\"builder\"] td.unread').textContent === '1'")
    send = page.locator("#timeline li", has_text="message lead → builder").first
    assert send.locator("[data-message-status]").inner_text() == "delivered"
    thread.call(team.let_go("builder", told))
    _until(page, "() => document.querySelector('#roster tr[data-member=\"builder\"] td.unread').textContent === '0'")
    _until(page, "() => document.querySelector('#timeline [data-message-status]').dataset.messageStatus === 'read'")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "team-panel-unread.png"), full_page=True)


CONTROLS_SCRIPT: dict[str, Any] = {
    "lead": [
        {"text": "A gated task and a planner.", "tool_calls": [
            {"name": "team_task_create", "arguments": {"subject": "Write p", "description": "Create src/p.py.",
                                                       "checks": ["test -f src/p.py || { echo 'src/p.py is missing'; exit 4; }"]}},
            {"name": "spawn_teammate", "arguments": {"name": "planner", "description": "Plans, then writes",
                                                     "prompt": "Plan task-1, then do it.", "plan_approval": True}},
        ]},
        {"text": "Waiting for the planner."},
    ],
    "planner": [
        {"text": "My plan.", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "lead", "plan": "submit", "message": "write src/p.py"}}]},
        {"when": "Your plan was rejected", "text": "Revised.", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "lead", "plan": "submit",
                                                   "message": "write src/p.py, then run its check"}}]},
        {"when": "Your plan is approved", "text": "Claiming and completing too early.", "tool_calls": [
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 1, "action": "claim"}},
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 2, "action": "complete"}},
        ]},
        {"when": "stays in_progress", "text": "Writing it, completing again.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "src/p.py", "content": "P = 1\n"}},
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 2, "action": "complete"}},
        ]},
    ],
}  # fmt: skip


def test_the_user_rejects_then_approves_a_plan_and_the_checks_show_a_failure_then_a_pass(
    tmp_path: Path, page: Any
) -> None:
    """The controls card: a submitted plan gets Approve/Reject; the user's decisions reach the teammate by Team mail."""
    thread = LoopThread()
    team = thread.call(open_team(tmp_path / "data", script=CONTROLS_SCRIPT))
    try:
        _open(page, team)
        page.wait_for_selector('[data-plan="planner"][data-status="submitted"] [data-decide="reject"]', timeout=WAIT_MS)
        assert page.inner_text('[data-plan="planner"] .plan-text') == "write src/p.py"
        page.fill("#plan-feedback", "say how you will check it")
        page.click('[data-plan="planner"] [data-decide="reject"]')
        _until(page, "() => document.querySelector('#plan-result').textContent.includes('rejected; planner is told')")
        page.wait_for_selector('[data-plan="planner"][data-status="submitted"]:has-text("round 2")', timeout=WAIT_MS)
        assert "say how you will check it" in page.inner_text('[data-plan="planner"]')
        page.click('[data-plan="planner"] [data-decide="approve"]')
        page.wait_for_selector('[data-plan="planner"][data-status="approved"]', timeout=WAIT_MS)
        assert page.locator('[data-plan="planner"] [data-decide]').count() == 0  # decided: no buttons
        page.wait_for_selector('#checks tr[data-outcome="passed"]', timeout=WAIT_MS)
        outcomes = page.eval_on_selector_all("#checks tbody tr", "rows => rows.map(r => r.dataset.outcome)")
        assert outcomes == ["failed", "passed"]
        assert "exited 4: src/p.py is missing" in page.inner_text('#checks tr[data-outcome="failed"]')
        page.wait_for_selector('[data-task="task-1"][data-status="completed"]', timeout=WAIT_MS)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "controls-card.png"), full_page=True)
    finally:
        thread.call(team.host.close())
        thread.stop()
    plan = team.service.controls.state(team.lead.session).plan("planner")
    assert (plan.status, plan.by, plan.rounds) == ("approved", "user", 2)


def test_the_message_box_sends_as_the_user_and_the_member_acts_on_it(live: tuple[LoopThread, Team], page: Any) -> None:
    """A message typed in the builder's row reaches it once, framed as the user's, and it finishes task-1."""
    thread, team = live
    _open(page, team)
    page.click('[data-send="builder"]')  # nothing written yet: refused in the page, nothing sent
    assert "Write a message for builder first" in page.inner_text("#send-result")
    page.fill('[data-send-text="builder"]', "finish now")
    page.click('[data-send="builder"]')
    _until(page, "() => document.querySelector('#send-result').textContent.includes('Sent to builder as the user')")
    page.wait_for_selector('[data-task="task-1"][data-status="completed"]', timeout=WAIT_MS)
    assert page.input_value('[data-send-text="builder"]') == ""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "team-panel-message-box.png"))
    thread.call(team.host.quiesce())
    session = team.host.sessions.get(team.agent_id("builder"))
    events = session.events if session is not None else thread.call(team.host.sessions.inspect(team.agent_id("builder"))).own_events()
    mine = [e.value() for e in events if e.type == "user/message" and "finish now" in bytes(e.data).decode()]
    assert len(mine) == 1 and mine[0]["source"]["kind"] == "user" and mine[0]["source"]["sender_id"] == "user"
    assert mine[0]["content"][0]["text"].endswith("from the user:")
    page.fill('[data-send-text="builder"]', "again")
    with page.expect_response("**/api/messages**") as sent:
        page.press('[data-send-text="builder"]', "Enter")
    assert sent.value.json()["ok"] is True


def test_a_team_run_by_another_process_is_followed_live_from_the_store(page: Any) -> None:
    """``dsh team serve --store``: what the Team's own process commits appears without a reload."""
    from follow_kit import Serve, StoreTeam
    from kit_postgres import shared_server

    url = shared_server().new_database()
    team = StoreTeam(url)
    serve = Serve(url)
    try:
        page.goto(serve.url)
        page.wait_for_selector('[data-task="task-1"][data-status="in_progress"]', timeout=WAIT_MS)
        _until(page, "() => window.dshPanel.opens >= 1")
        assert page.inner_text("#source") == "live from the store · read-only"
        assert not page.is_visible("#create")
        page.evaluate("() => { window.sameDocument = true; }")  # gone if the page reloads
        team.command("task Made by the other process")
        page.wait_for_selector('[data-task="task-3"]', timeout=WAIT_MS)
        assert "Made by the other process" in (page.locator('[data-task="task-3"]').text_content() or "")
        team.command("send finish now")
        _until(page, "() => [...document.querySelectorAll('#timeline li')].some(li => li.textContent.includes('message lead → builder'))")
        page.wait_for_selector('[data-task="task-1"][data-status="completed"]', timeout=WAIT_MS)
        assert page.evaluate("() => window.sameDocument === true && window.dshPanel.opens === 1")
    finally:
        team.close()
        assert "dsh: interrupted" in serve.close()


def test_the_user_answers_a_permission_ask_from_its_card(tmp_path: Path, page: Any) -> None:
    """The Permissions card: an open ask shows its call with Allow/Always/Deny; the answer reaches the member once."""
    from dsh_team.web.plugin import Panel
    from test_web_permissions import open_run

    thread = LoopThread()
    host, lead = thread.call(open_run(tmp_path / "data"))
    try:
        page.goto(host.service(Panel).url)
        page.wait_for_selector('[data-ask="ask-1"][data-status="open"] [data-answer="allow"]', timeout=WAIT_MS)
        assert "list_agents {}" in page.inner_text('[data-ask="ask-1"]')
        page.fill("#ask-reason", "go on")
        page.click('[data-ask="ask-1"] [data-answer="allow"]')
        _until(page, "() => document.querySelector('#ask-result').textContent.includes('ask-1: allow by you')")
        page.wait_for_selector('[data-ask="ask-1"][data-status="allow"]', timeout=WAIT_MS)
        assert page.locator('[data-ask="ask-1"] [data-answer]').count() == 0  # answered: no buttons
        assert "allow by user: go on" in page.inner_text('[data-ask="ask-1"]')
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "permissions-card.png"), full_page=True)
        thread.call(lead.when_idle())
    finally:
        thread.call(host.close())
        thread.stop()
    results = [e.value() for e in lead.session.events if e.type == "tool/result"]
    assert [r.get("is_error", False) for r in results] == [False]  # the call ran once it was allowed
