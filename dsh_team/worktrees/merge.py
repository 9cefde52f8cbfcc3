"""Merge on completion: a ``worktree``-mode task completes only once its owner's branch is in the Lead's.

Completing a task whose owner works in its own worktree (after its checks passed
there, :mod:`dsh_team.controls.gates`) is these steps:

1. The completion is decided on the current state exactly as an ordinary one
   (owner or Lead, ``in_progress``, current revision): a refusal touches nothing.
2. The owner's changes are committed on its branch (a message naming task and
   member) and the merge is *planned* in git's object store: a fast-forward when the
   Lead's branch has not moved, else a merge commit. A conflict raises
   ``TEAM_MERGE_CONFLICT`` with the paths; uncommitted changes of the Lead's checkout
   in a path the merge changes, or a detached HEAD, raise ``TEAM_MERGE_BLOCKED``. The
   task stays ``in_progress`` and the Lead's branch is untouched. On a conflict the host
   merges the Lead's branch into the member's worktree (``Worktrees.merge_lead``): the
   member resolves git's markers by editing the files and completes again, which
   concludes that merge, so the next plan is a fast-forward. The member never runs git
   itself: under its sandbox git's administrative files (in the repository's ``.git``)
   are read-only, and a model resolving a conflict with file edits is what it does best.
   A completion while markers remain is refused with the paths that still hold them.
3. ``team/merge`` ``intent`` -- with the commit the Lead's branch is at and the one it
   will point at -- is appended and flushed (decided in the serialized section again).
4. The Lead's branch moves by a compare-and-set, then the Lead's index and files follow.
   Merges into one Team's branch are serialized, so each plans on the last one's
   result; a branch moved by someone else (the user committing) fails the
   compare-and-set: ``abandoned`` is recorded and the merge is planned again.
5. The task's completion is appended, then ``team/merge`` ``done``.

A crash anywhere leaves the merge done exactly once or not at all, never half:
before 3 nothing is recorded and the branch never moved; after 3 the branch
itself says which one is true, and :meth:`Merges.recover` (when the Lead starts)
either finishes the checkout, records ``done`` and completes the task, or records
``abandoned`` (the branch never moved) and tells the member to complete again.
A branch that already contains the member's work (nothing to merge) completes as
an ordinary task.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from host_spec.worktrees import MergePlan, WorktreeError

from dsh_team.errors import TeamCode, TeamError
from dsh_team.log.journal import Append
from dsh_team.log.member_records import MemberRecords
from dsh_team.worktrees.records import MERGE_RECORDS, TEAM_MERGE, WORKTREE_VERSION, MergePhase, MergeRecord
from dsh_team.worktrees.room import spot_of

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Session

    from dsh_team.core.snapshots import TeamTaskSnapshot
    from dsh_team.core.state import TeamState
    from dsh_team.core.task_view import TaskView
    from dsh_team.log.journal import Journal
    from dsh_team.log.lifecycle import Complete, Lifecycle, Notify
    from dsh_team.worktrees.records import WorktreeRecord
    from dsh_team.worktrees.room import MemberWorktrees

__all__ = ["MergeBook", "Merges", "conflict_text", "markers_text"]

#: Plans made before giving up when the Lead's branch keeps moving under the merge (a user committing).
_ATTEMPTS = 3

log = structlog.get_logger(__name__)

class MergeBook(MemberRecords[MergeRecord]):
    """Each member's latest ``team/merge`` record, per live Lead session (an open merge is an ``intent``)."""

    def __init__(self) -> None:
        super().__init__(MERGE_RECORDS)


def _branch_name(target: str) -> str:
    return target.removeprefix("refs/heads/")


def conflict_text(task_id: str, record: WorktreeRecord, plan: MergePlan, conflicts: tuple[str, ...]) -> str:
    """What the member reads when its branch conflicts with the Lead's (the Lead's is now merged into its worktree)."""
    target = _branch_name(plan.target)
    paths = ", ".join(conflicts)
    return (
        f"{task_id} stays in_progress: merging {record.branch} into {target} conflicts in "
        f"{', '.join(plan.conflicts)}. Nothing changed on {target}. Your changes are committed on "
        f"{record.branch}, and {target} is now merged into your worktree: read {paths}, edit each to "
        "resolve git's conflict markers (<<<<<<<, =======, >>>>>>>), keeping what both sides need, "
        "then complete again (do not run git: completing concludes the merge)."
    )


def markers_text(task_id: str, record: WorktreeRecord, paths: tuple[str, ...]) -> str:
    """What the member reads when it completes while the merge in its worktree still has markers."""
    return (
        f"{task_id} stays in_progress: {', '.join(paths)} still hold conflict markers from the merge "
        f"into {record.branch}: edit them away (read each file first), then complete again."
    )


def _plan_of(record: MergeRecord) -> MergePlan:
    return MergePlan(target=record.target, old=record.old, new=record.new, source=record.source,
                     fast_forward=record.fast_forward)


class Merges:
    """The merge step of completions, and its recovery (a part of the Team service).

    Args:
        worktrees: The members' worktrees (and the host's git through them).
        lifecycle: Tracks recovery for disposal.
        call_soon: The host's scheduler (recovery runs after the Lead started).
    """

    def __init__(
        self, worktrees: MemberWorktrees, lifecycle: Lifecycle, call_soon: Callable[[Callable[[], Any]], None]
    ) -> None:
        self.worktrees = worktrees
        self.lifecycle = lifecycle
        self.call_soon = call_soon
        self.book = MergeBook()
        self._locks: dict[str, asyncio.Lock] = {}

    def applies(self, journal: Journal, task_id: Any) -> WorktreeRecord | None:
        """The owner's worktree when completing ``task_id`` merges a branch (``None``: an ordinary completion)."""
        task = journal.state.tasks.tasks.get(task_id) if isinstance(task_id, str) else None
        return self.worktrees.of(journal.session, task.owner_id) if task is not None else None

    def open_merges(self, session: Session) -> list[MergeRecord]:
        """Merges a crash left at ``intent``."""
        return [record for record in self.book.latest(session).values() if record.phase == "intent"]

    async def complete(
        self,
        journal: Journal,
        record: WorktreeRecord,
        decide: Callable[[TeamState], TeamTaskSnapshot],
        check: Callable[[TeamState], None],
        finish: Callable[[], Awaitable[TaskView]],
    ) -> TaskView:
        """Commit, merge and complete (module docstring, steps 1-5).

        Raises:
            TeamError: ``TEAM_MERGE_CONFLICT`` (the paths in ``details["paths"]``),
                ``TEAM_MERGE_BLOCKED``, and whatever ``decide``, ``check`` and ``finish`` raise.
        """
        check(journal.authoritative())
        decide(journal.authoritative())  # a refusal touches nothing, not even the member's branch
        lock = self._locks.setdefault(journal.team_id, asyncio.Lock())
        async with lock:  # one merge into the Lead's branch at a time: each plans on the last one's result
            for _ in range(_ATTEMPTS):
                merged = await self._attempt(journal, record, decide, check, finish)
                if merged is not None:
                    return merged
        task_id = decide(journal.authoritative()).id
        raise TeamError(f"{task_id} stays in_progress: the Lead's branch kept moving while merging; complete again",
                        TeamCode.MERGE_BLOCKED, task_id=task_id)

    async def _attempt(
        self,
        journal: Journal,
        record: WorktreeRecord,
        decide: Callable[[TeamState], TeamTaskSnapshot],
        check: Callable[[TeamState], None],
        finish: Callable[[], Awaitable[TaskView]],
    ) -> TaskView | None:
        """One plan, intent, move and completion; ``None``: plan again.

        Again when the Lead's branch moved under the merge (``abandoned``), or when a
        planned conflict did not happen in the worktree (the Lead's branch moved since).
        """
        task = decide(journal.authoritative())
        git = self.worktrees.git()
        spot = spot_of(record)
        message = f"{task.id}: {task.subject}\n\nCompleted by {record.member} in dsh Team {record.team_id}."
        merge_message = f"Merge {record.branch}: {task.id} ({record.member})"
        try:
            pending = await asyncio.to_thread(git.pending_merge, spot)
            if pending:
                raise TeamError(markers_text(task.id, record, pending), TeamCode.MERGE_CONFLICT, task_id=task.id,
                                paths=list(pending))
            if pending is not None:  # this commit concludes the merge of the Lead's branch into the worktree
                message = message.replace("\n\n", " (the Lead's branch merged in)\n\n", 1)
            await asyncio.to_thread(git.commit_all, spot, message, author=record.member)
            plan = await asyncio.to_thread(git.plan_merge, record.root, spot, message=merge_message)
            conflicts = (await asyncio.to_thread(git.merge_lead, record.root, spot, author=record.member)
                         if plan.conflicts else ())
        except WorktreeError as exc:
            raise TeamError(f"{task.id} stays in_progress: {exc.message}", TeamCode.MERGE_BLOCKED,
                            task_id=task.id) from None
        if conflicts:
            raise TeamError(conflict_text(task.id, record, plan, conflicts), TeamCode.MERGE_CONFLICT,
                            task_id=task.id, paths=list(plan.conflicts))
        if plan.conflicts:  # the Lead's branch merged cleanly into the worktree (it moved meanwhile): plan again
            return None
        if plan.blocked is not None:
            raise TeamError(f"{task.id} stays in_progress: {plan.blocked}", TeamCode.MERGE_BLOCKED, task_id=task.id)
        if plan.empty:
            return await finish()
        intent = MergeRecord(
            version=WORKTREE_VERSION, team_id=record.team_id, member_id=record.member_id,
            merge_id=f"merge-{uuid.uuid4()}", phase="intent", task_id=task.id,
            revision=journal.state.tasks.tasks[task.id].revision, member=record.member, target=plan.target,
            old=plan.old, new=plan.new, source=plan.source, fast_forward=plan.fast_forward,
        )

        def start(state: TeamState) -> Append:
            decide(state)
            return Append(TEAM_MERGE, intent)

        await journal.transact(start, what="the merge", check=check)
        if not await asyncio.to_thread(git.move_ref, record.root, plan):
            await self._settle(journal, intent, "abandoned")  # someone committed on the branch meanwhile
            return None
        await self._sync(record.root, plan)
        try:
            return await finish()
        finally:
            await self._settle(journal, intent, "done")

    async def _sync(self, root: str, plan: MergePlan) -> None:
        try:
            await asyncio.to_thread(self.worktrees.git().sync_checkout, root, plan)
        except WorktreeError as exc:  # the branch moved: the merge is done; the files are the user's to update
            log.warning("team.merge_checkout_not_updated", root=root, error=exc.message)

    async def _settle(self, journal: Journal, intent: MergeRecord, phase: MergePhase) -> None:
        record = msgspec.structs.replace(intent, phase=phase)
        await journal.transact(lambda state: Append(TEAM_MERGE, record), what="the merge result")
        log.info("team.merge_settled", merge=intent.merge_id, task=intent.task_id, phase=phase)

    # ------------------------------------------------------------ recovery

    def agent_started(self, lead: Agent, journal: Journal, complete: Complete, notify: Notify) -> None:
        """Schedule the recovery of the merges a crash left open."""
        if self.open_merges(journal.session):
            self.call_soon(lambda: self.lifecycle.track(self.recover(lead, journal, complete, notify)))

    async def recover(self, lead: Agent, journal: Journal, complete: Complete, notify: Notify) -> None:
        """Settle each open merge by what the Lead's branch says; tell its member. Failures are logged."""
        for intent in self.open_merges(journal.session):
            try:
                git = self.worktrees.git()
                record = self.worktrees.of(journal.session, intent.member_id)
                root = record.root if record is not None else lead.session.header.cwd or "."
                plan = _plan_of(intent)
                async with self._locks.setdefault(journal.team_id, asyncio.Lock()):  # no merge plans meanwhile
                    applied = await asyncio.to_thread(git.merge_applied, root, plan)
                    if applied:
                        await self._sync(root, plan)
                    await self._settle(journal, intent, "done" if applied else "abandoned")
                if applied:  # completing goes through the merge path again (nothing left to merge): unlocked
                    task = journal.state.tasks.tasks.get(intent.task_id)
                    if task is not None and task.status == "in_progress" and task.revision == intent.revision:
                        await complete(lead, intent.task_id, intent.revision)
                    text = f"The merge of {intent.task_id} finished after a restart: it is completed."
                else:
                    text = (f"The merge of {intent.task_id} was cut by a restart before "
                            f"{_branch_name(intent.target)} moved: nothing was merged; complete it again.")
                await notify(lead, intent.member, text)
            except Exception as exc:
                log.warning("team.merge_recovery_failed", merge=intent.merge_id, error=repr(exc))

    def forget(self, session: Session) -> None:
        self.book.forget(session)
