"""Members' worktrees: where a ``worktree``-mode teammate works, found, recreated and removed.

A teammate in ``worktree`` mode has one workspace root: its own git worktree,
which becomes its session header's ``cwd`` when it is created
(``start_continuable(cwd=...)``). Everything that acts in a member's workspace --
the file tools, ``bash``, a sandbox's writable root, its task's checks -- reads
that one place, so nothing else needs to know about worktrees.

The git work is the host's (:class:`host_spec.worktrees.Worktrees`); this room
decides *when*, and keeps the facts in the Lead log (``team/worktree``, folded per
member by :class:`WorktreeBook`):

* provisioning: the place is decided and recorded before the worktree exists
  (:meth:`MemberWorktrees.prepare`), created once the record is durable
  (:meth:`create`), removed when the member ends up ``failed`` (:meth:`discard`);
* recovery: a member whose provisioning a crash cut and which recovery settled as
  ``failed`` loses its worktree right after that settlement (:meth:`recover`); an active member whose worktree is gone (removed
  at a clean end, or by hand) gets it back from its branch when it starts
  (:meth:`ensure`);
* a member shut down for good (:meth:`member_gone`), and the end of the Team: every worktree whose branch is merged and which holds no
  uncommitted change is removed with its branch (:meth:`cleanup`); one with work
  left is kept (and listed by ``dsh team show``), as is every one under
  ``keep_worktrees``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

import structlog

from host_spec.worktrees import Worktrees, WorktreeError, WorktreeSpot

from dsh_team.errors import TeamCode, TeamError
from dsh_team.log.member_records import MemberRecords
from dsh_team.worktrees.records import TEAM_WORKTREE, WORKTREE_RECORDS, WORKTREE_VERSION, WorktreeRecord

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host, Session

    from dsh_team.config import TeamConfig
    from dsh_team.core.state import TeamState
    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals

__all__ = ["WorktreeBook", "MemberWorktrees", "spot_of"]

log = structlog.get_logger(__name__)


def spot_of(record: WorktreeRecord) -> WorktreeSpot:
    """The host's view of a recorded worktree."""
    return WorktreeSpot(path=record.path, branch=record.branch)


class WorktreeBook(MemberRecords[WorktreeRecord]):
    """Each member's worktree, per live Lead session, folded incrementally from its ``team/worktree`` records."""

    def __init__(self) -> None:
        super().__init__(WORKTREE_RECORDS)


class MemberWorktrees:
    """The worktree part of the Team service (see the module docstring).

    Args:
        host: Finds the :class:`Worktrees` service on each use (a reload may replace it).
        config: ``workspace_mode`` and ``keep_worktrees``.
        journals: The service's journals.
    """

    def __init__(self, host: Host, config: TeamConfig, journals: Journals) -> None:
        self.host = host
        self.config = config
        self.journals = journals
        self.book = WorktreeBook()

    # ------------------------------------------------------------ reads

    def git(self) -> Worktrees:
        """The host's worktrees.

        Raises:
            TeamError: ``TEAM_WORKTREE_UNAVAILABLE`` (the host offers none).
        """
        git = self.host.find_service(Worktrees)
        if git is None:
            raise TeamError("worktree mode needs a host that provides git worktrees (plugin workspace)",
                            TeamCode.WORKTREE_UNAVAILABLE)
        return git

    def records(self, session: Session) -> Mapping[str, WorktreeRecord]:
        """Member id -> worktree record of ``session``'s Team."""
        return self.book.latest(session)

    def of(self, session: Session, member_id: str | None) -> WorktreeRecord | None:
        """The worktree of ``member_id`` in ``session``'s Team (``None``: it works in the shared checkout)."""
        return None if member_id is None else self.records(session).get(member_id)

    def workspace(self, journal: Journal, task_id: str) -> str | None:
        """Where ``task_id``'s checks run: its owner's worktree, ``None`` for the Lead's checkout."""
        task = journal.state.tasks.tasks.get(task_id)
        record = self.of(journal.session, task.owner_id if task is not None else None)
        return None if record is None else record.path

    # ------------------------------------------------------------ provisioning

    def mode(self, role_mode: str | None) -> str:
        """The workspace mode of a new teammate: its role's, else the Team's."""
        return role_mode if role_mode is not None else self.config.workspace_mode

    def prepare(self, lead: Agent, name: str, member_id: str) -> WorktreeRecord:
        """Decide where teammate ``name`` (``member_id``) of ``lead``'s Team works (nothing is written or created).

        Raises:
            TeamError: ``TEAM_WORKTREE_UNAVAILABLE`` (no workspace, not a git repository
                with a commit, no git, or the place is taken by another run's worktree),
                the message naming the fix.
        """
        root = lead.session.header.cwd
        if root is None:
            raise TeamError("worktree mode needs a workspace: run with --workspace DIR (a git repository)",
                            TeamCode.WORKTREE_UNAVAILABLE)
        git = self.git()
        try:
            spot = git.place(root, team=lead.id, member=name)
        except WorktreeError as exc:
            raise TeamError(exc.message, TeamCode.WORKTREE_UNAVAILABLE) from None
        left = git.state(root, spot)
        if left.exists or left.branch_exists:  # names are never reused in a Team: another run left it
            raise TeamError(
                f"{spot.branch} or {spot.path} exists already (left by another run?): remove it with "
                f"`git worktree remove --force {spot.path}; git branch -D {spot.branch}`",
                TeamCode.WORKTREE_UNAVAILABLE)
        return WorktreeRecord(version=WORKTREE_VERSION, team_id=lead.id, member_id=member_id, member=name, root=root,
                              path=spot.path, branch=spot.branch)

    @staticmethod
    def append(session: Session, record: WorktreeRecord) -> None:
        """Append ``record`` (inside the provisioning section, before the member's ``provisioning`` record)."""
        session.append(TEAM_WORKTREE, record)

    async def create(self, record: WorktreeRecord) -> None:
        """Create the recorded worktree (idempotent) once its record is durable.

        Raises:
            TeamError: ``TEAM_WORKTREE_UNAVAILABLE`` with git's answer.
        """
        git = self.git()
        try:
            await asyncio.to_thread(git.create, record.root, spot_of(record))
        except WorktreeError as exc:
            raise TeamError(f"cannot create the worktree of {record.member}: {exc.message}",
                            TeamCode.WORKTREE_UNAVAILABLE) from None

    async def discard(self, record: WorktreeRecord) -> None:
        """Remove the worktree of a member that never became active (nothing of its own is in it). Never raises."""
        try:
            await asyncio.to_thread(self.git().remove, record.root, spot_of(record), force=True)
        except (TeamError, WorktreeError) as exc:
            log.warning("team.worktree_discard_failed", member=record.member, path=record.path, error=str(exc))

    # ------------------------------------------------------------ recovery and the end

    def failed_with_worktree(self, journal: Journal, state: TeamState) -> list[WorktreeRecord]:
        """Worktrees of members that ended ``failed`` (a crash cut their creation)."""
        members = state.members.members
        return [record for member_id, record in self.records(journal.session).items()
                if member_id in members and members[member_id].phase == "failed"]

    async def recover(self, journal: Journal) -> None:
        """Remove the worktrees of failed members (recovery after a crash). Never raises."""
        for record in self.failed_with_worktree(journal, journal.state):
            await self.discard(record)

    def ensure(self, agent: Agent) -> None:
        """A teammate started: bring its worktree back if it is gone (from its branch). Never raises."""
        parent = agent.session.header.parent_session
        journal = self.journals.find(parent) if parent is not None else None
        record = self.of(journal.session, agent.id) if journal is not None else None
        git = self.host.find_service(Worktrees)
        if record is None or git is None:
            return
        try:
            git.create(record.root, spot_of(record))  # a no-op for a worktree that is there
        except WorktreeError as exc:
            log.warning("team.worktree_restore_failed", member=record.member, path=record.path, error=exc.message)

    async def member_gone(self, journal: Journal, member_id: str) -> None:
        """A member shut down for good: its worktree goes once merged (else, or with ``keep_worktrees``, it stays)."""
        record = self.of(journal.session, member_id)
        git = self.host.find_service(Worktrees)
        if record is None or git is None or self.config.keep_worktrees:
            return
        try:
            removed = await asyncio.to_thread(git.remove, record.root, spot_of(record))
        except WorktreeError as exc:
            log.warning("team.worktree_cleanup_failed", member=record.member, error=exc.message)
            return
        log.info("team.worktree_after_shutdown", member=record.member, removed=removed)

    def cleanup(self) -> dict[str, str]:
        """The Team ends: remove each merged, clean worktree with its branch. Never raises.

        Returns:
            Member name -> what happened (``removed``, ``kept``: work left or
            ``keep_worktrees``, or the failure).
        """
        outcome: dict[str, str] = {}
        git = self.host.find_service(Worktrees)
        if git is None:
            return outcome
        for journal in list(self.journals):
            members = journal.state.members.members
            for member_id, record in self.records(journal.session).items():
                force = getattr(members.get(member_id), "phase", None) == "failed"
                try:
                    if self.config.keep_worktrees and not force:
                        outcome[record.member] = "kept"
                    elif git.remove(record.root, spot_of(record), force=force):
                        outcome[record.member] = "removed"
                    else:
                        outcome[record.member] = "kept"
                        log.info("team.worktree_kept", member=record.member, path=record.path,
                                 reason="commits or changes not merged")
                except WorktreeError as exc:
                    outcome[record.member] = f"failed: {exc.message}"
                    log.warning("team.worktree_cleanup_failed", member=record.member, error=exc.message)
        return outcome

    def forget(self, session: Session) -> None:
        self.book.forget(session)

