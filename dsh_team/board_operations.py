"""The task board's operations of :class:`~dsh_team.service.TeamService`: reads and compare-and-set mutations.

:class:`BoardOperations` is a part of the service (like
:class:`~dsh_team.member_operations.MemberOperations`): it holds no state of its own.
Reads come from the Lead's folded state; every mutation is one transaction in the
Lead's journal, admitted by the lifecycle and refused while Team mode is off, its
decision taken by the pure rules of :mod:`dsh_team.core.board` on the state folded
just before the append.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from host_spec.records import AbortSignal

from dsh_team.core.actor import Actor
from dsh_team.core.board import decide_create, decide_update, require_task
from dsh_team.core.records import TEAM_TASK, VERSION, TaskRecord
from dsh_team.core.task_view import TaskView, list_views, task_view
from dsh_team.core.tombstones import restore
from dsh_team.log.journal import Append

if TYPE_CHECKING:
    from host_spec.protocols import Agent

    from dsh_team.config import TeamConfig
    from dsh_team.core.snapshots import TeamTaskSnapshot
    from dsh_team.core.state import TeamState
    from dsh_team.log.journal import Journal
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.mode import ModeControl
    from dsh_team.log.membership import Membership
    from dsh_team.worktrees.merge import Merges

__all__ = ["BoardOperations"]


class BoardOperations:
    """``list_tasks``, ``get_task``, ``create_task`` and ``update_task`` of the service."""

    config: TeamConfig
    lifecycle: Lifecycle
    mode: ModeControl
    merges: Merges

    if TYPE_CHECKING:  # the service's own membership calls and the gated completion of ControlOperations

        def membership(self, agent: Agent) -> Membership: ...
        def _lead(self, membership: Membership) -> Journal: ...
        def _gated_complete(
            self, caller: Agent, task_id: Any, decide: Callable[[TeamState, Membership], TeamTaskSnapshot],
            signal: AbortSignal | None,
        ) -> Awaitable[TaskView] | None: ...

    def _mutate(
        self,
        caller: Agent,
        decide: Callable[[TeamState, Membership], TeamTaskSnapshot],
        what: str,
    ) -> Awaitable[TaskView]:
        """One task mutation in the Lead's journal, admitted and tracked for disposal when it runs.

        A plain function returning the journal's transaction, which its caller
        awaits: one coroutine fewer on every mutation.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER`` (at once, before anything is admitted).
        """
        membership = self.membership(caller)
        journal = self._lead(membership)
        decided: list[TeamTaskSnapshot] = []

        def check(state: TeamState) -> None:
            self.lifecycle.admit()
            self.mode.require_enabled(caller, (membership.root, state))  # the Lead's state, just folded

        def record(state: TeamState) -> Append:
            snapshot = decide(state, membership)
            decided.append(snapshot)
            return Append(TEAM_TASK, TaskRecord(version=VERSION, team_id=membership.team_id, task=snapshot))

        def render(state: TeamState) -> TaskView:
            # The board keeps a deleted task as a tombstone; the decided snapshot is its whole value.
            task = state.tasks.tasks[decided[0].id]
            return task_view(state, decided[0] if task.status == "deleted" else task, state.position)

        return journal.transact(record, render, what=what, check=check, guard=self.lifecycle.operation())

    def list_tasks(self, caller: Agent) -> list[TaskView]:
        """Non-deleted tasks in board (creation) order.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``, ``TEAM_STREAM_FAILED``.
        """
        return list_views(self._lead(self.membership(caller)).authoritative())

    def get_task(self, caller: Agent, task_id: Any) -> TaskView:
        """One task, deleted tombstones included.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``, ``TEAM_TASK_NOT_FOUND``, ``TEAM_INVALID_ARGUMENT``,
                ``TEAM_STREAM_FAILED``.
        """
        journal = self._lead(self.membership(caller))
        state = journal.authoritative()
        return task_view(state, restore(state, require_task(state, task_id), journal.session.events))

    async def create_task(
        self,
        caller: Agent,
        *,
        subject: Any,
        description: Any,
        blocked_by: Any = None,
        write_scopes: Any = None,
        checks: Any = None,
    ) -> TaskView:
        """Create an unowned pending task (any member); returns its revision-1 view once durable.

        ``checks`` are the quality checks completing it must pass (see :mod:`dsh_team.controls.gates`).

        Raises:
            TeamError: the creation codes of :func:`~dsh_team.core.board.decide_create`, ``TEAM_NOT_MEMBER``, ``TEAM_DISPOSED``, ``TEAM_MODE_DISABLED``,
                ``TEAM_TASK_PERSISTENCE_UNCONFIRMED`` (visible; read before retrying).
        """

        def decide(state: TeamState, membership: Membership) -> TeamTaskSnapshot:
            return decide_create(
                state,
                Actor(membership.member_id, membership.role),
                subject=subject,
                description=description,
                blocked_by=blocked_by,
                write_scopes=write_scopes,
                checks=checks,
                max_tasks=self.config.max_tasks,
            )

        return await self._mutate(caller, decide, "the new team task")

    async def update_task(
        self,
        caller: Agent,
        *,
        task_id: Any,
        expected_revision: Any,
        action: Any,
        subject: Any = None,
        description: Any = None,
        blocked_by: Any = None,
        write_scopes: Any = None,
        owner: Any = None,
        signal: AbortSignal | None = None,
        gated: bool = True,
    ) -> TaskView:
        """Compare-and-set one authorized transition; returns the next revision once durable.

        ``complete`` of a task with quality gates runs them first and completes only
        when all pass (:mod:`dsh_team.controls.gates`; ``signal`` interrupts them;
        ``gated=False`` is recovery's completion of a run that passed). ``complete`` of
        a task whose owner works in its own worktree merges its branch first
        (:mod:`dsh_team.worktrees.merge`: ``TEAM_MERGE_CONFLICT``, ``TEAM_MERGE_BLOCKED``).

        Raises:
            TeamError: the update codes of :func:`~dsh_team.core.board.decide_update`, ``TEAM_NOT_MEMBER``, ``TEAM_DISPOSED``, ``TEAM_MODE_DISABLED``,
                ``TEAM_TASK_PERSISTENCE_UNCONFIRMED`` (visible; read before retrying).
        """

        def decide(state: TeamState, membership: Membership) -> TeamTaskSnapshot:
            return decide_update(
                state,
                Actor(membership.member_id, membership.role),
                task_id=task_id,
                expected_revision=expected_revision,
                action=action,
                subject=subject,
                description=description,
                blocked_by=blocked_by,
                write_scopes=write_scopes,
                owner=owner,
            )

        if action == "complete":
            if gated:
                gated_run = self._gated_complete(caller, task_id, decide, signal)
                if gated_run is not None:
                    return await gated_run  # its passing run completes through here again (gated=False)
            merged = self._merged_complete(caller, task_id, decide)
            if merged is not None:
                return await merged
        return await self._mutate(caller, decide, f"team task {task_id}")

    def _merged_complete(
        self, caller: Agent, task_id: Any, decide: Callable[[TeamState, Membership], TeamTaskSnapshot]
    ) -> Awaitable[TaskView] | None:
        """The merge step of ``complete`` when the task's owner works in its own worktree (else ``None``).

        Raises:
            TeamError: ``TEAM_NOT_MEMBER`` (at once).
        """
        membership = self.membership(caller)
        journal = self._lead(membership)
        record = self.merges.applies(journal, task_id)
        if record is None:
            return None

        def check(state: TeamState) -> None:
            self.lifecycle.admit()
            self.mode.require_enabled(caller, (membership.root, state))

        return self.merges.complete(journal, record, lambda state: decide(state, membership), check,
                                    lambda: self._mutate(caller, decide, f"team task {task_id}"))
