"""Quality gates: a task completes only when its checks and the Team's ``on_complete`` gates pass.

``complete`` of a gated task is three durable steps instead of one:

1. In the Lead's serialized section the completion is decided exactly as an
   ungated one would be (owner or Lead, ``in_progress``, current revision) and,
   instead of the completed snapshot, ``team/check/started`` is appended with the
   commands to run; it is flushed before the first command starts.
2. The commands run one after the other in the Lead's workspace (the owner's own
   worktree in ``worktree`` mode) through the
   host's :class:`~host_spec.workspace.CommandRunner` (the ``bash`` tool's rules:
   the host's sandbox under the completing member's policy, own process group,
   timeout, capped output, no credentials in the environment),
   stopping at the first failure. ``team/check/finished`` records each exit code
   and output tail.
3. Only a passing finish completes the task (the ordinary compare-and-set update
   at the revision the run started from). A failure raises
   ``TEAM_TASK_CHECK_FAILED`` with the tail of the output: the task stays
   ``in_progress`` and its owner keeps working (a Claude Code ``TaskCompleted``
   hook's exit status 2).

A crash (or a closing host) between 1 and 3 leaves evidence in the log, never a
silent completion: a run started and not finished is run again when the Lead
starts (``rerun``), and a passing run whose task is still ``in_progress`` at its
revision is completed then; either way the owner is told by Team mail.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import structlog

from host_spec.messages import text_block
from host_spec.workspace import CommandRunner, WorkspaceError

from dsh_team.controls.ledger import CheckRun, LiveControls
from dsh_team.controls.records import (
    CONTROLS_VERSION,
    TEAM_CHECK_FINISHED,
    TEAM_CHECK_STARTED,
    CheckFinishedRecord,
    CheckResult,
    CheckStartedRecord,
    CheckStep,
    how_it_ended,
)
from dsh_team.errors import TeamCode, TeamError
from dsh_team.log.journal import Append

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host
    from host_spec.records import AbortSignal

    from dsh_team.config import TeamConfig
    from dsh_team.core.snapshots import TeamTaskSnapshot
    from dsh_team.core.state import TeamState
    from dsh_team.core.task_view import TaskView
    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Complete, Lifecycle, Notify
    from dsh_team.log.membership import Membership

__all__ = ["Gates", "check_steps", "failure_text"]

log = structlog.get_logger(__name__)

RUN_PREFIX: Final = "check-"



def check_steps(config: TeamConfig, task: TeamTaskSnapshot) -> tuple[CheckStep, ...]:
    """The gates completing ``task`` must pass: its checks, then the Team's ``on_complete`` ones.

    A check naming a profile check (``[checks]``) runs that command; any other is a
    command itself. A command listed twice runs once (its first place).
    """
    named = config.checks
    steps: list[CheckStep] = []
    seen: set[str] = set()
    for check in (*task.checks, *config.gates.on_complete):
        step = CheckStep(command=named[check], name=check) if check in named else CheckStep(command=check)
        if step.command not in seen:
            seen.add(step.command)
            steps.append(step)
    return tuple(steps)


def failure_text(task_id: str, finished: CheckFinishedRecord) -> str:
    """What the member reads when ``task_id``'s gates failed: which command, how, and the output tail."""
    last = finished.results[-1]
    how = how_it_ended(last) + (" and was killed" if last.timed_out else "")
    output = f"Output tail:\n{last.tail}" if last.tail.strip() else "It printed nothing."
    return f'{task_id} stays in_progress: check "{last.name or last.command}" {how}. Fix it and complete again. {output}'



def _tail(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[-chars:]


class Gates:
    """Runs the gates of completions and recovers the runs a crash cut (a part of the Team service).

    Args:
        host: Finds the :class:`CommandRunner` on each run (a reload may replace it).
        config: Named checks and the ``gates`` table.
        journals, controls, lifecycle: The service's journals, controls fold and lifetime.
        workspace: Where a task's checks run when not in the Lead's workspace: its
            owner's own worktree (:mod:`dsh_team.worktrees`), ``None`` for the Lead's.
        role_of: The role a member (by name) was spawned with, ``None``: none; its
            checks run under that role's sandbox policy, as its ``bash`` calls do.
    """

    def __init__(
        self, host: Host, config: TeamConfig, journals: Journals, controls: LiveControls, lifecycle: Lifecycle,
        workspace: Callable[[Journal, str], str | None] = lambda journal, task_id: None,
        role_of: Callable[[Journal, str], str | None] = lambda journal, member: None,
    ) -> None:
        self.host = host
        self.workspace = workspace
        self.role_of = role_of
        self.config = config
        self.journals = journals
        self.controls = controls
        self.lifecycle = lifecycle
        #: Runs executing in this process now (recovery leaves them alone).
        self.running: set[str] = set()

    def applies(self, state: TeamState, task_id: Any) -> bool:
        """Whether completing ``task_id`` runs gates (unknown ids go the ordinary way and fail there)."""
        task = state.tasks.tasks.get(task_id) if isinstance(task_id, str) else None
        return task is not None and bool(task.checks or self.config.gates.on_complete)

    def _runner(self, journal: Journal, task_id: str | None = None) -> tuple[CommandRunner, str]:
        runner = self.host.find_service(CommandRunner)
        root = (self.workspace(journal, task_id) if task_id is not None else None) or journal.session.header.cwd
        if runner is None or root is None:
            raise TeamError(
                "this task has quality checks, but the run has no workspace to run them in", TeamCode.TASK_CHECK_FAILED
            )
        return runner, root

    async def complete(
        self,
        membership: Membership,
        decide: Callable[[TeamState], TeamTaskSnapshot],
        check: Callable[[TeamState], None],
        finish: Callable[[int], Awaitable[TaskView]],
        signal: AbortSignal | None,
    ) -> TaskView:
        """Run a gated completion (module docstring, steps 1-3).

        Args:
            membership: The caller's membership.
            decide: The ordinary completion decision (raises what an ungated one raises).
            check: Admission, Team mode and plan approval, first in the section.
            finish: The ordinary completion at the given revision.
            signal: The tool call's abort signal (an interrupt kills the running check).

        Raises:
            TeamError: ``TEAM_TASK_CHECK_FAILED`` (a gate failed, or no workspace), and
                whatever ``check``, ``decide`` and ``finish`` raise.
        """
        journal = self.journals.get(membership.root.session)
        runner, root = self._runner(journal)
        run_id = f"{RUN_PREFIX}{uuid.uuid4()}"
        started: list[CheckStartedRecord] = []

        def start(state: TeamState) -> Append:
            task = decide(state)
            if task.id in self.controls.state(journal.session).open:
                raise TeamError(
                    f"the checks of {task.id} are running already", TeamCode.TASK_INVALID_TRANSITION, task_id=task.id
                )
            current = state.tasks.tasks[task.id]
            record = CheckStartedRecord(
                version=CONTROLS_VERSION,
                team_id=membership.team_id,
                run_id=run_id,
                task_id=task.id,
                revision=current.revision,
                member=membership.name,
                steps=check_steps(self.config, current),
            )
            started.append(record)
            return Append(TEAM_CHECK_STARTED, record)

        self.running.add(run_id)
        try:
            await journal.transact(start, what="the check run", check=check)
            root = self.workspace(journal, started[0].task_id) or root
            finished = await self._run(journal, runner, root, started[0], signal, rerun=False)
        finally:
            self.running.discard(run_id)
        if not finished.passed:
            raise TeamError(failure_text(started[0].task_id, finished), TeamCode.TASK_CHECK_FAILED,
                            task_id=started[0].task_id, run_id=run_id)
        return await finish(started[0].revision)

    async def _run(
        self,
        journal: Journal,
        runner: CommandRunner,
        root: str,
        run: CheckStartedRecord,
        signal: AbortSignal | None,
        *,
        rerun: bool,
    ) -> CheckFinishedRecord:
        """Run ``run``'s steps (stopping at the first failure) and record how it ended."""
        results: list[CheckResult] = []
        gates = self.config.gates
        role = self.role_of(journal, run.member)
        for step in run.steps:
            try:
                outcome = await runner.run_command(root, step.command, timeout_ms=gates.timeout_ms, signal=signal,
                                                  member=run.member, **({"role": role} if role is not None else {}))
            except WorkspaceError as error:
                results.append(CheckResult(
                    command=step.command, exit_code=None, name=step.name, tail=_tail(error.message, gates.tail_chars)
                ))
                break
            results.append(
                CheckResult(
                    command=step.command,
                    exit_code=outcome.exit_code,
                    name=step.name,
                    tail=_tail(outcome.output, gates.tail_chars),
                    timed_out=outcome.timed_out,
                    interrupted=outcome.interrupted,
                    timeout_ms=gates.timeout_ms if outcome.timed_out else None,
                )
            )
            if not outcome.passed:
                break
        passed = len(results) == len(run.steps) and all(result.exit_code == 0 for result in results)
        record = CheckFinishedRecord(
            version=CONTROLS_VERSION, team_id=run.team_id, run_id=run.run_id, passed=passed, results=tuple(results),
            rerun=rerun,
        )
        await journal.transact(lambda state: Append(TEAM_CHECK_FINISHED, record), what="the check result")
        log.info("team.check_finished", run=run.run_id, task=run.task_id, passed=passed, rerun=rerun)
        return record

    # ------------------------------------------------------------ recovery

    def unsettled(self, journal: Journal) -> Sequence[CheckRun]:
        """Runs a crash left unsettled: started and not finished, or passed with the task still open."""
        state = journal.state
        runs = []
        for run in self.controls.state(journal.session).listed():
            if run.started.run_id in self.running:
                continue
            task = state.tasks.tasks.get(run.started.task_id)
            still_open = task is not None and task.status == "in_progress" and task.revision == run.started.revision
            if run.open or (still_open and run.finished is not None and run.finished.passed):
                runs.append(run)
        return runs

    def agent_started(self, lead: Agent, journal: Journal, complete: Complete, notify: Notify) -> None:
        """Schedule the recovery of the runs a crash left unsettled, once the Lead started."""
        if self.unsettled(journal):
            self.host.call_soon(lambda: self.lifecycle.track(self.recover(lead, journal, complete, notify)))

    async def recover(self, lead: Agent, journal: Journal, complete: Complete, notify: Notify) -> None:
        """Run the cut runs again, complete the tasks of passing ones, tell each owner. Failures are logged."""
        for run in self.unsettled(journal):
            started = run.started
            try:
                finished = run.finished
                if finished is None:
                    runner, root = self._runner(journal, started.task_id)
                    self.running.add(started.run_id)
                    try:
                        finished = await self._run(journal, runner, root, started, None, rerun=True)
                    finally:
                        self.running.discard(started.run_id)
                if finished.passed:
                    await complete(lead, started.task_id, started.revision)
                    text = f"The checks of {started.task_id} ran again after a restart and passed: it is completed."
                else:
                    text = "The checks ran again after a restart. " + failure_text(started.task_id, finished)
                if started.member != "lead":
                    await notify(lead, started.member, text)
            except Exception as exc:
                log.warning("team.check_recovery_failed", run=started.run_id, error=repr(exc))
