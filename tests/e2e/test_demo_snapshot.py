"""Product snapshot: the scripted team demo, run through the real ``dsh`` CLI in subprocesses.

Pinned in golden files (``tests/e2e/golden/``, reviewed like code; regenerate with
``pytest --update-golden``, which fails each test whose file it rewrote):

* ``model_surface.json`` -- the complete model-facing tool list and system prompt
  (Team policy) of the Lead and of a teammate, as the turn loop hands them to the model;
* ``final_projection.json`` -- roster, board and pending mail from ``dsh team show --json``;
* ``team_events.json`` -- the set of durable Team events in the Lead's log.

Generated ids (session ids, message ids) are replaced by stable placeholders;
``seq``/``time`` and anything else that depends on scheduling (how many
``(waiting)`` turns ran, log lengths) is left out of the goldens.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest
from kit_golden import Golden
from e2e_demo_kit import (
    REPO,
    SCRIPT,
    TIMEOUT_S,
    Stored,
    GOLDEN,
    board,
    dsh,
    environment,
    probe_profile,
    resume_args,
    run_args,
    team_event_set,
    team_show,
)

pytestmark = pytest.mark.slow

TEAM_TOOLS = [
    "spawn_teammate",
    "send_message",
    "list_agents",
    "wait_agent",
    "interrupt_agent",
    "team_task_create",
    "team_task_list",
    "team_task_get",
    "team_task_update",
]
WORKSPACE_TOOLS = ["read_file", "write_file", "edit_file", "glob", "list_dir", "grep", "bash"]


@attrs.frozen
class DemoRun:
    """One finished demo run: its process result and the data directory it left."""

    env: dict[str, str]
    data: Path
    result: subprocess.CompletedProcess[str]
    surface: list[dict[str, Any]]


@pytest.fixture(scope="module")
def make_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``dsh demo`` exactly as ``make demo`` runs it (``--profile agent-teams``)."""
    tmp = tmp_path_factory.mktemp("make-demo")
    data = tmp / "data"
    result = subprocess.run(
        [sys.executable, "-m", "host_spec.host.cli.main", "demo", str(data)],
        env=environment(tmp),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=REPO,
    )
    return DemoRun(environment(tmp), data, result, [])


@pytest.fixture(scope="module")
def probed_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``dsh run`` of the demo with the ``e2e-probe`` observer recording each member's model surface."""
    tmp = tmp_path_factory.mktemp("probed-demo")
    env = environment(tmp)
    out = tmp / "surface.jsonl"
    profile = probe_profile(tmp, "surface", surface_out=str(out))
    data = tmp / "data"
    result = dsh(env, *run_args(data, profile))
    surface = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return DemoRun(env, data, result, surface)


def _tool_results(stored: Stored, session_id: str, name: str) -> list[Any]:
    """Decoded JSON results of every successful ``name`` call in one session."""
    found = []
    for event in stored.sessions[session_id][1]:
        if event.type == "tool/result":
            value = event.value()
            if value.get("name") == name and not value.get("is_error"):
                found.append(json.loads(value["content"][0]["text"]))
    return found


def _said(step: dict[str, Any]) -> str:
    """Everything a scripted step puts into its own conversation (text and call arguments)."""
    return "\n".join([step.get("text", ""), *(json.dumps(c.get("arguments", {})) for c in step.get("tool_calls", []))])


class TestScript:
    def test_every_gate_waits_for_another_member(self) -> None:
        """Each ``when`` gate is text only another member sends: never in the agent's own steps or first prompt."""
        script = json.loads(SCRIPT.read_text())
        sent: dict[str, list[str]] = {}  # target -> messages other members send it
        prompts: dict[str, str] = {}
        for name, steps in script.items():
            for step in steps:
                for call in step.get("tool_calls", []):
                    arguments = call.get("arguments", {})
                    if call["name"] == "send_message":
                        sent.setdefault(arguments["target"], []).append(arguments["message"])
                    if call["name"] == "spawn_teammate":
                        prompts[arguments["name"]] = arguments["prompt"]
        gates = 0
        for name, steps in script.items():
            own = prompts.get(name, "")
            for step in steps:
                gate = step.get("when")
                if gate is not None:
                    gates += 1
                    assert gate not in own, f"{name}: gate {gate!r} opens on the agent's own words"
                    assert any(gate in message for message in sent.get(name, [])), f"{name}: nobody sends {gate!r}"
                own += _said(step)
        assert gates == 3


GREET_FINAL = 'def greet(name: str) -> str:\n    """Return the greeting for name."""\n    return f"Hello, {name}!"\n'
REVIEW_FIRST_LINE = "# Review of src/greet.py"


def _workspace_results(stored: Stored, session_id: str) -> list[dict[str, Any]]:
    """``(name, error code or None, decoded result)`` of every workspace tool result in one session's own log."""
    header, events = stored.sessions[session_id]
    rows = []
    for event in events[header.seed_length :]:
        value = event.value() if event.type == "tool/result" else None
        if value is not None and value["name"] in WORKSPACE_TOOLS:
            error = value.get("error") or {}
            body = None if value.get("is_error") else json.loads(value["content"][0]["text"])
            rows.append({"name": value["name"], "code": error.get("code"), "message": error.get("message"),
                         "result": body})
    return rows


class TestRealWork:
    """The demo changes real files in its workspace, and one member's stale edit is refused."""

    def test_the_files_the_team_wrote(self, make_demo: DemoRun) -> None:
        """builder wrote src/greet.py, the reviewer added a docstring and wrote docs/review.md, builder added hints."""
        assert make_demo.result.returncode == 0, make_demo.result.stderr
        workspace = make_demo.data / "workspace"
        assert sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file()) == [
            "docs/review.md", "src/greet.py"]
        assert (workspace / "src/greet.py").read_text() == GREET_FINAL
        review = (workspace / "docs/review.md").read_text()
        assert review.startswith(REVIEW_FIRST_LINE + "\n") and "Verdict: approved." in review
        out = make_demo.result.stdout
        assert "--- src/greet.py" in out and GREET_FINAL in out  # the demo shows the files

    def test_the_demo_runs_sandboxed_and_says_so(self, make_demo: DemoRun) -> None:
        """Every member's commands in the default sandbox: the run's header says it, ``team show`` too."""
        assert make_demo.result.returncode == 0, make_demo.result.stderr
        assert "dsh: sandbox: workspace-write (bubblewrap, network off)\n" in make_demo.result.stderr
        assert "UNSANDBOXED: none" in make_demo.result.stdout  # the demo prints dsh team show

    def test_one_stale_edit_is_refused_then_redone_after_a_read(self, make_demo: DemoRun) -> None:
        """Exactly one FILE_STALE in the whole team: the builder's, whose diff shows the reviewer's docstring."""
        stored = Stored(make_demo.data)
        names = {name: sid for sid, name in stored.children().items()}
        builder = _workspace_results(stored, names["builder"])
        reviewer = _workspace_results(stored, names["reviewer"])
        lead = _workspace_results(stored, stored.root)
        assert [(r["name"], r["code"]) for r in builder] == [
            ("write_file", None), ("edit_file", "FILE_STALE"), ("read_file", None), ("edit_file", None)]
        assert [(r["name"], r["code"]) for r in reviewer] == [
            ("read_file", None), ("write_file", None), ("edit_file", None)]
        assert lead == []
        stale = builder[1]["message"]
        assert '+    """Return the greeting for name."""' in stale and "nothing was written" in stale
        # the reviewer read exactly what the builder wrote
        assert reviewer[0]["result"]["sha256"] == builder[0]["result"]["sha256"]
        out = make_demo.result.stdout
        assert "[builder] tool result edit_file (error) Error: src/greet.py changed since you read it" in out

    def test_the_writes_section_audits_every_write(self, make_demo: DemoRun) -> None:
        """dsh team show lists the four writes with their write-scope verdicts."""
        shown = team_show(make_demo.env, make_demo.data)
        rows = [(w["member"], w["path"], w["tool"], w["tasks"], w["in_scope"]) for w in shown["writes"]]
        assert rows == [
            ("builder", "src/greet.py", "write_file", ["task-1"], True),
            ("reviewer", "docs/review.md", "write_file", ["task-2"], True),
            ("reviewer", "src/greet.py", "edit_file", ["task-2"], False),
            ("builder", "src/greet.py", "edit_file", [], False),
        ]
        assert shown["writes"][2]["warnings"] == ["src/greet.py is outside the write scopes of your task(s) task-2"]
        assert "Writes (4; 2 outside the writer's task scopes)" in make_demo.result.stdout


class TestMakeDemo:
    def test_the_demo_exits_normally_with_transcript_and_board(self, make_demo: DemoRun) -> None:
        """``make demo`` exits 0 and prints member-prefixed turns, tool calls, results and the final board."""
        result = make_demo.result
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        out = result.stdout
        for member in ("lead", "builder", "reviewer"):
            assert f"[{member}] assistant: " in out
            assert f"[{member}] tool call " in out
            assert f"[{member}] tool result " in out
        assert "[lead] tool call wait_agent " in out
        assert " from builder: task-1 complete: src/greet.py is written." in out  # framed Team mail
        lines = out.splitlines()
        # builder went to disk after its first turn; the reviewer's verdict woke it from there.
        woken = lines.index("[builder] (resumed from disk)")
        assert lines[woken + 1].startswith("[builder] user (team-message): Team message ")
        assert "from reviewer: Review verdict: approved." in lines[woken + 1]
        assert lines.count("[builder] (resumed from disk)") == 1
        assert not any(line.startswith("[lead] assistant: (script exhausted)") for line in lines)
        assert "dsh team show" in out
        assert "task-2" in out.split("dsh team show", 1)[1]

    def test_every_member_log_exists_under_the_lead(self, make_demo: DemoRun) -> None:
        """The Lead log and one child log per roster member exist; fork inherits, fresh does not."""
        stored = Stored(make_demo.data)
        children = stored.children()
        assert sorted(children.values()) == ["builder", "reviewer"]
        assert set(stored.sessions) == {stored.root, *children}
        by_name = {name: sid for sid, name in children.items()}
        for sid in children:
            header, events = stored.sessions[sid]
            assert header.parent_session == stored.root
            assert events[header.seed_length].type == "subagent/descriptor"
        assert stored.sessions[by_name["builder"]][0].seed_length == 0
        assert stored.sessions[by_name["reviewer"]][0].seed_length > 0  # forked from a finished Lead turn

    def test_logs_refold_to_the_state_the_run_saw(self, make_demo: DemoRun) -> None:
        """Folding the logs offline gives what the Lead read live, and every child log is balanced."""
        stored = Stored(make_demo.data)
        show = team_show(make_demo.env, make_demo.data)
        assert show["failure"] is None and show["pending_mail"] == []
        live_board = _tool_results(stored, stored.root, "team_task_list")[-1]["tasks"]
        offline = {t["id"]: (t["revision"], t["status"], t["owner_name"], t["ready"]) for t in show["tasks"]}
        live = {t["id"]: (t["revision"], t["status"], t.get("owner_name"), t["ready"]) for t in live_board}
        assert offline == live == {
            "task-1": (3, "completed", "builder", False),
            "task-2": (3, "completed", "reviewer", False),
        }
        live_roster = _tool_results(stored, stored.root, "list_agents")[-1]["members"]
        assert [(m["target"], m["role"]) for m in live_roster] == [(m["name"], m["role"]) for m in show["members"]]
        delivered = {e.value()["message_id"]: e.value()["target_id"] for e in stored.team_events()
                     if e.type == "team/message/delivered"}
        for sid, (header, events) in stored.sessions.items():
            own = events[header.seed_length :]
            turns = Counter(e.type for e in own if e.type in ("turn/start", "turn/end"))
            assert turns["turn/start"] == turns["turn/end"] > 0, sid
            got = stored.messages_in(sid)
            assert got == Counter({mid: 1 for mid, target in delivered.items() if target == sid}), sid

    def test_resuming_a_finished_run_changes_nothing(self, make_demo: DemoRun) -> None:
        """``dsh resume`` on the finished demo re-folds the same Team and appends no Team event."""
        before = Stored(make_demo.data)
        shown = board(team_show(make_demo.env, make_demo.data), before.ids())
        result = dsh(make_demo.env, *resume_args(make_demo.data))
        assert result.returncode == 0, result.stderr
        after = Stored(make_demo.data)
        assert [e.seq for e in after.team_events()] == [e.seq for e in before.team_events()]
        assert board(team_show(make_demo.env, make_demo.data), after.ids()) == shown


class TestSnapshot:
    def test_model_surface_of_lead_and_teammate(self, probed_demo: DemoRun, golden: Golden) -> None:
        """Each member sees one fixed surface: the nine Team tools, the seven workspace tools and the policy."""
        assert probed_demo.result.returncode == 0, probed_demo.result.stderr
        by_agent: dict[str, list[dict[str, Any]]] = {}
        for row in probed_demo.surface:
            by_agent.setdefault(row["agent"], []).append({"system": row["system"], "tools": row["tools"]})
        assert sorted(by_agent) == ["builder", "lead", "reviewer"]
        assert all(len(rows) == 1 for rows in by_agent.values()), "a member's surface changed between steps"
        lead, builder, reviewer = by_agent["lead"][0], by_agent["builder"][0], by_agent["reviewer"][0]
        assert builder == reviewer
        assert sorted(tool["name"] for tool in lead["tools"]) == sorted(TEAM_TOOLS + WORKSPACE_TOOLS)
        assert "# Agent Team" in lead["system"]
        golden.check(GOLDEN / "model_surface.json", {"lead": lead, "teammate": builder}, sort_keys=True)

    def test_final_projection(self, probed_demo: DemoRun, golden: Golden) -> None:
        """The final roster, board and (empty) pending mail, as ``dsh team show --json`` reports them."""
        stored = Stored(probed_demo.data)
        projection = board(team_show(probed_demo.env, probed_demo.data), stored.ids())
        golden.check(GOLDEN / "final_projection.json", projection, sort_keys=True)

    def test_durable_team_events(self, probed_demo: DemoRun, golden: Golden) -> None:
        """The Lead's durable Team events (type + normalized payload) as a set."""
        events = team_event_set(Stored(probed_demo.data))
        assert len({json.dumps(e, sort_keys=True) for e in events}) == len(events)
        golden.check(GOLDEN / "team_events.json", events, sort_keys=True)
