"""The controls as users see them: the scripted demo through the real CLI, then ``dsh team show`` and ``dsh trace export``.

The demo (``examples/controls_demo.json`` with ``examples/controls.toml``) is the
oracle's input: a plan-gated builder whose first write is refused, whose plan the
Lead approves, whose first completion fails its ``greets`` check and whose second
passes. Every view must tell that same story from the logs.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_team.controls import ControlsState, fold_controls
from dsh_team.views.controls import build_controls, render_controls

from host_spec.host.cli.main import main

from test_controls_fold import event, finished, plan, started
from test_team_crash import DSH

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("controls-demo")
    (root / "ws").mkdir()
    ran = subprocess.run(
        [*DSH, "run", "--profile", str(EXAMPLES / "controls.toml"), "--model",
         f"scripted:{EXAMPLES / 'controls_demo.json'}", "--data-dir", str(root / "data"), "--workspace",
         str(root / "ws"), "Use an Agent Team: build src/greet.py behind a quality check, plan first."],
        capture_output=True, timeout=180,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr.decode()[-2000:]
    (root / "transcript.txt").write_bytes(ran.stdout)
    return root


def dsh(demo: Path, *args: str) -> str:
    """``dsh ARGS --data-dir DEMO`` in this process (so coverage sees the views); its stdout."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main([*args, "--data-dir", str(demo / "data")])
    assert status == 0
    return out.getvalue()


def exported(demo: Path, *args: str) -> str:
    """``dsh trace export --out FILE ARGS`` in this process; the file's text."""
    out = demo / "trace.json"
    dsh(demo, "trace", "export", "--out", str(out), *args)
    return out.read_text()


@pytest.mark.slow
class TestDemo:
    def test_the_transcript_shows_the_veto_the_approval_and_the_failed_check(self, demo: Path) -> None:
        text = (demo / "transcript.txt").read_text()
        refused = text.index("write_file (error) Error: write_file needs an approved plan")
        approved = text.index("Your plan is approved")
        failed = text.index('stays in_progress: check "greets" exited 1')
        assert refused < approved < failed < text.index('"status":"completed"')
        assert "AssertionError: Hi, Ada!" in text
        assert (demo / "ws" / "src" / "greet.py").read_text() == 'def greet(name):\n    return f"Hello, {name}!"\n'

    def test_team_show_lists_the_runs_and_the_plan(self, demo: Path) -> None:
        text = dsh(demo, "team", "show")
        block = text[text.index("Controls:"):].splitlines()
        assert block[1].startswith("  check task-1@2 by builder: failed -- greets: python3")
        assert block[2].strip().startswith("greets exited 1: AssertionError: Hi, Ada!")
        assert block[3].startswith("  check task-1@2 by builder: passed")
        assert block[4] == "  plan of builder: approved (by lead, 1 submitted) -- Go ahead."
        document: dict[str, Any] = json.loads(dsh(demo, "team", "show", "--json"))
        runs = document["controls"]["runs"]
        assert [r["outcome"] for r in runs] == ["failed", "passed"] and runs[0]["exit_code"] == 1
        assert document["controls"]["plans"][0]["plan"].startswith("1. claim task-1")
        early = json.loads(dsh(demo, "team", "show", "--json", "--at", str(runs[0]["seq"])))
        assert [r["outcome"] for r in early["controls"]["runs"]] == ["running"]  # as it was then

    def test_trace_export_has_the_control_events(self, demo: Path) -> None:
        export = json.loads(exported(demo))
        names = [
            (span["name"], ev["name"], {a["key"]: a["value"] for a in ev["attributes"]})
            for rs in export["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
            for ev in span.get("events", []) if ev["name"].startswith(("team.check", "team.plan"))
        ]
        assert [n[1] for n in names] == ["team.plan", "team.plan", "team.plan", "team.check.started",
                                         "team.check.finished", "team.check.started", "team.check.finished"]
        assert names[0][0] == "execute_tool spawn_teammate" and names[3][0] == "execute_tool team_task_update"
        assert "dsh.team.plan.text" not in names[1][2]  # content only on request
        assert names[4][2]["dsh.team.check.passed"] == {"boolValue": False}
        with_content = json.loads(exported(demo, "--content"))
        events = [ev for rs in with_content["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
                  for ev in span.get("events", []) if ev["name"].startswith(("team.check", "team.plan"))]
        texts = [{a["key"]: a["value"] for a in ev["attributes"]} for ev in events]
        submitted = next(t for t in texts if t.get("dsh.team.plan.action") == {"stringValue": "submitted"})
        assert submitted["dsh.team.plan.text"]["stringValue"].startswith("1. claim task-1")
        failed = next(t for t in texts if t.get("dsh.team.check.passed") == {"boolValue": False})
        assert "AssertionError: Hi, Ada!" in failed["dsh.team.check.tail"]["stringValue"]


class TestRender:
    def test_nothing_to_show_is_no_section(self) -> None:
        assert build_controls(ControlsState("lead")) is None

    def test_a_failed_fold_and_a_rerun_are_shown(self) -> None:
        state = ControlsState("lead")
        records = [("team/check/started", started("r1")), ("team/check/finished", finished("r1")),
                   ("team/plan", plan("approved"))]
        for seq, (kind, record) in enumerate(records, 1):
            state = fold_controls(state, event(seq, kind, record))
        report = build_controls(state)
        assert report is not None and report.failure is not None
        lines = render_controls(report)
        assert lines[1].startswith("  FAILURE (controls): seq 3: plan of planner: approved cannot follow nothing")
        assert lines[2] == "  check task-1@2 by builder: passed -- true"

    def test_a_rerun_and_a_failure_without_results(self) -> None:
        import msgspec

        state = ControlsState("lead")
        rerun = msgspec.structs.replace(finished("r1"), rerun=True)
        empty = finished("r2", passed=False)
        records = [("team/check/started", started("r1")), ("team/check/finished", rerun),
                   ("team/check/started", started("r2")), ("team/check/finished", empty),
                   ("team/plan", plan("required")), ("team/plan", plan("submitted", text="p")),
                   ("team/plan", plan("rejected", text="more tests"))]
        for seq, (kind, record) in enumerate(records, 1):
            state = fold_controls(state, event(seq, kind, record))
        report = build_controls(state)
        assert report is not None and report.runs[1].failed_check is None
        assert render_controls(report)[1:] == [
            "  check task-1@2 by builder: passed (re-run after a restart) -- true",
            "  check task-1@2 by builder: failed -- true",
            "  plan of planner: rejected (by lead, 1 submitted) -- more tests",
        ]

    def test_a_timed_out_check_says_so_and_a_silent_one_no_bare_tail(self) -> None:
        import msgspec

        from dsh_team.controls import CheckResult

        def failed(run: str, result: CheckResult) -> Any:
            return msgspec.structs.replace(finished(run, passed=False), results=(result,))

        state = ControlsState("lead")
        records = [
            ("team/check/started", started("r1")),
            ("team/check/finished", failed("r1", CheckResult(command="sleep 60", exit_code=None, timed_out=True,
                                                             timeout_ms=120_000))),
            ("team/check/started", started("r2")),
            ("team/check/finished", failed("r2", CheckResult(command="false", exit_code=1))),
            ("team/check/started", started("r3")),
            ("team/check/finished", failed("r3", CheckResult(command="make", exit_code=None, interrupted=True,
                                                             tail="compiling\n"))),
        ]
        for seq, (kind, record) in enumerate(records, 1):
            state = fold_controls(state, event(seq, kind, record))
        report = build_controls(state)
        assert report is not None
        lines = render_controls(report)
        assert lines[2] == "    sleep 60 timed out after 120 s (no output)"
        assert lines[4] == "    false exited 1 (no output)"
        assert lines[6] == "    make was interrupted: compiling"
        document = json.loads(msgspec.json.encode(report))
        assert [(r["timed_out"], r["exit_code"], r["ended"]) for r in document["runs"]] == [
            (True, None, "timed out after 120 s"), (False, 1, "exited 1"), (False, None, "was interrupted")]


@pytest.mark.slow
def test_the_demo_runner_prints_the_story(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, str(EXAMPLES / "run_controls_demo.py"), "--data-dir", str(tmp_path / "d")],
                         capture_output=True, timeout=180, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr.decode()[-2000:]
    out = ran.stdout.decode()
    assert "greets exited 1: AssertionError: Hi, Ada!" in out and "plan of builder: approved" in out
    assert out.rstrip().splitlines()[-3:-1] == ["def greet(name):", '    return f"Hello, {name}!"']
