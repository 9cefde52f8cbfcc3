"""The controls section of ``dsh team show`` and the web panel: every gate run and every plan approval.

Built from the controls fold (:mod:`dsh_team.controls.ledger`) of the same Lead
log prefix the rest of the view folds, so ``--at SEQ`` shows the runs and plans
as they were then. A run started and never finished is shown as ``running`` (in a
live panel) -- after a crash it is the run ``dsh resume`` runs again.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from dsh_team.controls.ledger import ControlsState
from dsh_team.controls.records import CheckResult, PlanAction, how_it_ended

__all__ = ["ShowRun", "ShowPlan", "ControlsReport", "build_controls", "render_controls"]

RunOutcome = Literal["running", "passed", "failed"]


class ShowRun(msgspec.Struct, frozen=True):
    """One gate run.

    Attributes:
        run_id, task_id, revision, member: Which completion asked for it.
        seq: Lead-log seq of its start.
        outcome: ``running`` (started, not finished), ``passed`` or ``failed``.
        rerun: Finished by recovery after a crash cut it.
        checks: The commands (or ``name: command``) it runs, in order.
        failed_check: The failing command, its exit code and output tail (a failed run only).
        ended: How the failing command ended, in words (``exited 1``, ``timed out after 120 s``).
        timed_out, interrupted: Why the failing command was killed (its ``exit_code`` is then ``None``).
    """

    run_id: str
    task_id: str
    revision: int
    member: str
    seq: int
    outcome: RunOutcome
    rerun: bool
    checks: tuple[str, ...]
    failed_check: str | None = None
    exit_code: int | None = None
    tail: str | None = None
    ended: str | None = None
    timed_out: bool = False
    interrupted: bool = False


class ShowPlan(msgspec.Struct, frozen=True):
    """One plan-gated teammate: where its approval stands, its latest plan and the last feedback."""

    member: str
    status: PlanAction
    plan: str
    feedback: str
    by: str
    rounds: int
    seq: int


class ControlsReport(msgspec.Struct, frozen=True):
    """Runs in log order, plans by member, and the fold's failure (``None``: none)."""

    runs: tuple[ShowRun, ...]
    plans: tuple[ShowPlan, ...]
    failure: str | None = None


def build_controls(controls: ControlsState) -> ControlsReport | None:
    """The section, or ``None`` for a Team that never ran a gate nor gated a plan."""
    if not controls.runs and not controls.plans and controls.failure is None:
        return None
    runs = []
    for run in controls.listed():
        started, finished = run.started, run.finished
        steps = tuple(f"{s.name}: {s.command}" if s.name else s.command for s in started.steps)
        failed: CheckResult | None = None
        if finished is not None and not finished.passed and finished.results:
            failed = finished.results[-1]
        outcome: RunOutcome = "running" if finished is None else "passed" if finished.passed else "failed"
        runs.append(ShowRun(
            run_id=started.run_id, task_id=started.task_id, revision=started.revision, member=started.member,
            seq=run.seq, outcome=outcome, rerun=finished is not None and finished.rerun, checks=steps,
            failed_check=None if failed is None else failed.name or failed.command,
            exit_code=None if failed is None else failed.exit_code,
            tail=None if failed is None else failed.tail,
            ended=None if failed is None else how_it_ended(failed),
            timed_out=failed is not None and failed.timed_out,
            interrupted=failed is not None and failed.interrupted,
        ))
    plans = tuple(
        ShowPlan(member=p.member, status=p.status, plan=p.plan, feedback=p.feedback, by=p.by, rounds=p.rounds,
                 seq=p.seq)
        for _, p in sorted(controls.plans.items(), key=lambda item: item[1].seq)
    )
    return ControlsReport(runs=tuple(runs), plans=plans, failure=controls.failure)


def _short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def render_controls(report: ControlsReport) -> list[str]:
    """The text block: one line per run (a failure's last output line under it), one per plan."""
    lines = ["Controls:"]
    if report.failure is not None:
        lines.append(f"  FAILURE (controls): {report.failure}")
    for run in report.runs:
        again = " (re-run after a restart)" if run.rerun else ""
        lines.append(f"  check {run.task_id}@{run.revision} by {run.member}: {run.outcome}{again} -- "
                     + _short("; ".join(run.checks)))
        if run.failed_check is not None:
            last = (run.tail or "").strip().splitlines()[-1:]
            said = f": {_short(last[0])}" if last else " (no output)"
            lines.append(f"    {_short(run.failed_check)} {run.ended}{said}")
    for plan in report.plans:
        feedback = f" -- {_short(plan.feedback)}" if plan.feedback else ""
        lines.append(f"  plan of {plan.member}: {plan.status} (by {plan.by}, {plan.rounds} submitted){feedback}")
    return lines
