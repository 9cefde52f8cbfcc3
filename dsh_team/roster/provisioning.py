"""``spawn_teammate``: the provisioning state machine of a teammate.

::

    (no record) --admission--> provisioning --creator success--> active
                                     |--------creator failure--> failed(error)
                                     |--------recovery---------> active | failed(error)
    active, failed: terminal (no rename, no deletion, no name reuse)

Durability order is the point. The ``provisioning`` record is flushed *before*
the child exists, so a crash can never leave a child nobody knows about; the
child's log must durably hold the initial prompt *before* the Lead commits
``active``, so an ``active`` member always has work it can resume. A crash in
between leaves ``provisioning``, which recovery settles from the child's log
(:mod:`.reconcile`).

The creator and recovery race for the single terminal edge. Each writes it in the
Lead's serialized section only while the record is still ``provisioning``; the
loser learns what the winner wrote and never leaves an orphan: a creator that
finds ``failed`` drains the child it just made, and a creator whose start failed
after recovery wrote ``active`` reports the conflict.

Teammates are started with ``notify=False``: the Lead follows them through the
roster, ``wait_agent`` and their messages, not through a host notice each time one
goes idle (idle pings burn the Lead's turns and name session ids the Team never shows).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
import msgspec
import structlog

from host_spec.records import AbortSignal

from dsh_team.errors import TeamCode, TeamError, render_reason
from dsh_team.core.records import TEAM_MEMBER, VERSION, MemberRecord
from dsh_team.core.snapshots import TeamMemberSnapshot
from dsh_team.log.journal import Append, Journal
from dsh_team.roster.roles import ROLE_VERSION, TEAM_ROLE, RoleRecord, RoleSpec
from dsh_team.roster.roster import TEXT_MAX, MemberView, RosterService, validate_name
from dsh_team.mail.holdings import SessionMessages, await_accepted, creation_aborted
from dsh_team.core.state import TeamState
from dsh_team.core.validation import check_content, required_text

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host
    from dsh_team.config import TeamConfig
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.log.membership import MembershipResolver
    from dsh_team.worktrees.records import WorktreeRecord
    from dsh_team.worktrees.room import MemberWorktrees

__all__ = ["CONTEXTS", "Provisioner", "decide_spawn"]

log = structlog.get_logger(__name__)

CONTEXTS: Final = ("fresh", "fork")


@attrs.frozen
class _Request:
    """A validated spawn request with its reserved child id."""

    root: Agent = attrs.field(eq=False)
    snapshot: TeamMemberSnapshot
    prompt: list[dict[str, Any]]
    role: tuple[str, RoleSpec] | None = None
    worktree: WorktreeRecord | None = None


def _model_of(role: tuple[str, RoleSpec] | None) -> dict[str, Any]:
    """``{"model": spec}`` for a role that names one (a host without roles never sees the keyword)."""
    return {"model": role[1].model} if role is not None and role[1].model is not None else {}


def _role_of(role: tuple[str, RoleSpec] | None) -> dict[str, Any]:
    """``{"role": name}`` for a spawn with a role: the host keys its own per-role settings on the name (its
    sandbox policy), which only its configuration can widen (a spawn without one never passes the keyword)."""
    return {"role": role[0]} if role is not None else {}


def _cwd_of(worktree: WorktreeRecord | None) -> dict[str, Any]:
    """``{"cwd": path}`` for a member with its own worktree (a shared-mode spawn never passes the keyword)."""
    return {"cwd": worktree.path} if worktree is not None else {}


def decide_spawn(state: TeamState, team_id: str, snapshot: TeamMemberSnapshot, limit: int) -> MemberRecord:
    """Admit a new teammate (pure): its ``provisioning`` record, or why the Team refuses it.

    The argument checks (name rules, description, context, prompt) ran before the
    child id was reserved; this is what only the folded Team can answer.

    Raises:
        TeamError: ``TEAM_MEMBER_NAME_TAKEN`` (a member of that name exists, whatever its
            phase), ``TEAM_MEMBER_LIMIT`` (``limit`` teammates already).
    """
    if snapshot.name in state.members.names:
        raise TeamError(f'teammate name "{snapshot.name}" is already taken', TeamCode.MEMBER_NAME_TAKEN)
    if len(state.members.members) >= limit:
        raise TeamError(f"the Team already has its limit of {limit} teammates", TeamCode.MEMBER_LIMIT)
    return MemberRecord(version=VERSION, team_id=team_id, member=snapshot)


class Provisioner:
    """Creates teammates (Lead only) and owns the creator's side of the terminal edge.

    Args:
        host: The host (``continuations``, ``sessions``, ``agents``).
        config: Limits (``max_members``).
        journals, members, lifecycle: The service's journal, membership and lifetime.
        messages: Session message indexes (the initial-prompt checkpoint).
        roster: Builds the returned member row.
        worktrees: Members' worktrees (``worktree`` mode, :mod:`dsh_team.worktrees`).
    """

    def __init__(
        self,
        host: Host,
        config: TeamConfig,
        journals: Journals,
        members: MembershipResolver,
        lifecycle: Lifecycle,
        messages: SessionMessages,
        roster: RosterService,
        worktrees: MemberWorktrees,
    ) -> None:
        self.host = host
        self.worktrees = worktrees
        self.config = config
        self.journals = journals
        self.members = members
        self.lifecycle = lifecycle
        self.messages = messages
        self.roster = roster

    async def spawn(
        self,
        caller: Agent,
        *,
        name: Any,
        description: Any,
        prompt: Any,
        context: Any = "fresh",
        provider: Any,
        signal: AbortSignal | None = None,
        role: tuple[str, RoleSpec] | None = None,
        worktree: bool = False,
    ) -> MemberView:
        """Provision a continuable child as a named teammate; returns its row once ``active`` is durable.

        ``role`` (name, checked spec): recorded as ``team/role`` in the same section as
        ``provisioning`` (see :mod:`.roles`); its model spec starts the child.
        ``worktree``: the teammate works in its own git worktree, recorded as
        ``team/worktree`` in that section and created once it is durable, before the
        child starts there (:mod:`dsh_team.worktrees`).

        Raises:
            TeamError: ``TEAM_DISPOSED``, ``TEAM_NOT_MEMBER``, ``TEAM_LEAD_REQUIRED``,
                ``TEAM_INVALID_MEMBER_NAME``, ``TEAM_INVALID_ARGUMENT``, ``TEAM_MEMBER_NAME_TAKEN``,
                ``TEAM_MEMBER_LIMIT``, ``TEAM_PROVISIONING_CONFLICT``, ``TEAM_STREAM_FAILED``,
                ``TEAM_PERSISTENCE_UNCONFIRMED``, ``TEAM_WORKTREE_UNAVAILABLE`` (before anything
                is written when the workspace is no git repository; after ``failed`` was
                recorded when git could not create the worktree).
            SubagentError: the host could not start the child (re-raised as is, after
                ``failed`` was recorded).
            BaseExceptionGroup: the creation failed *and* recording that failure (or
                cleaning up the child) failed too.
            BaseException: an exception abort reason of ``signal``.
        """
        self.lifecycle.admit()
        membership = self.members.resolve(caller)
        if not membership.is_lead:
            raise TeamError("only the Team Lead can create teammates", TeamCode.LEAD_REQUIRED)
        combined = AbortSignal.any(signal, self.lifecycle.signal)
        if combined.aborted:
            raise creation_aborted(combined.reason)
        valid_name = validate_name(name)
        text = required_text(description, "description", TEXT_MAX)
        child_id = self.host.continuations.new_child_id()
        chosen = required_text(provider, "provider", TEXT_MAX)
        if context not in CONTEXTS:
            raise TeamError('context must be "fresh" or "fork"', TeamCode.INVALID_ARGUMENT)
        request = _Request(
            root=membership.root,
            snapshot=TeamMemberSnapshot(
                id=child_id, name=valid_name, description=text, provider=chosen, context=context, phase="provisioning"
            ),
            prompt=list(check_content(prompt, "prompt")),
            role=role,
            worktree=self.worktrees.prepare(membership.root, valid_name, child_id) if worktree else None,
        )
        return await asyncio.shield(self.lifecycle.track(self._create(request, combined)))

    # ------------------------------------------------------------ the state machine

    def _record(self, root: Agent, snapshot: TeamMemberSnapshot, **changes: Any) -> Append:
        member = msgspec.structs.replace(snapshot, **changes) if changes else snapshot
        return Append(TEAM_MEMBER, MemberRecord(version=VERSION, team_id=root.id, member=member))

    async def _create(self, request: _Request, signal: AbortSignal) -> MemberView:
        root, snapshot = request.root, request.snapshot
        journal = self.journals.get(root.session)
        limit = self.config.max_members

        def admit(state: TeamState) -> Append:
            record = decide_spawn(state, root.id, snapshot, limit)
            if request.role is not None:  # before the member exists: its first step already has its allowlist
                name, spec = request.role
                journal.session.append(TEAM_ROLE, RoleRecord(
                    version=ROLE_VERSION, team_id=root.id, member_id=snapshot.id, role=name, spec=spec))
            if request.worktree is not None:  # recorded before it exists: a crash leaves no unknown worktree
                self.worktrees.append(journal.session, request.worktree)
            return Append(TEAM_MEMBER, record)

        # Failures are handled *after* the except clauses: an error raised while
        # recording them must not carry the creation error as its implicit context
        # (disposal would mistake a real recording failure for its own cancellation).
        failure: BaseException | None = None
        try:
            await journal.transact(admit, what=f'teammate "{snapshot.name}"', check=self._still_open)
        except TeamError as exc:
            if snapshot.id not in journal.state.members.members:
                raise  # rejected: nothing was appended
            failure = exc  # appended, but not durable: never start the child
        if failure is not None:
            await self._failed(journal, request, failure)
        try:
            if request.worktree is not None:
                await self.worktrees.create(request.worktree)
            _, message_id = await self.host.continuations.start_continuable(
                child_id=snapshot.id,
                provider=snapshot.provider,
                label=snapshot.description,
                prompt=request.prompt,
                parent=root,
                signal=signal,
                name=snapshot.name,
                notify=False,
                **_model_of(request.role),
                **_role_of(request.role),
                **_cwd_of(request.worktree),
            )
            await await_accepted(self.host.sessions, self.messages, snapshot.id, message_id, signal)
        except BaseException as exc:
            failure = creation_aborted(signal.reason) if signal.aborted else exc
        if failure is not None:
            await self._failed(journal, request, failure)
        return await self._activated(journal, request)

    def _still_open(self, state: TeamState) -> None:
        self.lifecycle.admit()

    async def _failed(self, journal: Journal, request: _Request, original: BaseException) -> None:
        """Record ``failed`` (unless already settled), drain the child, and raise (the failure edge)."""
        snapshot = request.snapshot
        errors: list[BaseException] = []

        def settle(state: TeamState) -> Append | None:
            current = state.members.members[snapshot.id]
            if current.phase == "active":
                raise TeamError(
                    f'teammate "{snapshot.name}" became active while its creator reported failure',
                    TeamCode.PROVISIONING_CONFLICT,
                )
            if current.phase != "provisioning":
                return None
            return self._record(request.root, snapshot, phase="failed", error=render_reason(original))

        try:
            await journal.transact(settle, what=f'failure of teammate "{snapshot.name}"')
        except Exception as exc:
            errors.append(exc)
        errors.extend(await self._drain(request))
        if request.worktree is not None:
            await self.worktrees.discard(request.worktree)
        log.warning("team.provisioning_failed", team=journal.team_id, member=snapshot.id, error=render_reason(original))
        if errors:
            raise BaseExceptionGroup("teammate creation and durable failure recording both failed", [original, *errors])
        raise original

    async def _activated(self, journal: Journal, request: _Request) -> MemberView:
        """Commit ``active`` (unless already settled) and return the row (the success edge)."""
        snapshot = request.snapshot
        reconciled: list[TeamMemberSnapshot] = []

        def settle(state: TeamState) -> Append | None:
            current = state.members.members[snapshot.id]
            if current.phase != "provisioning":
                reconciled.append(current)
                return None
            return self._record(request.root, snapshot, phase="active")

        await journal.transact(settle, what=f'teammate "{snapshot.name}"')
        if reconciled and reconciled[0].phase == "failed":
            conflict = TeamError(
                f'teammate "{snapshot.name}" was reconciled as failed while creation was in progress',
                TeamCode.PROVISIONING_CONFLICT,
            )
            errors = await self._drain(request)  # a worktree of this failed member goes when the Team ends
            if errors:
                raise BaseExceptionGroup("teammate creation conflict cleanup failed", [conflict, *errors])
            raise conflict
        log.info("team.teammate_active", team=journal.team_id, member=snapshot.id, name=snapshot.name)
        return self.roster.view(msgspec.structs.replace(snapshot, phase="active"), None)

    async def _drain(self, request: _Request) -> Sequence[BaseException]:
        """Release the child (bounded); the failure, if any, for the caller to report."""
        try:
            await self.lifecycle.with_timeout(
                self.host.continuations.drain(request.root, [request.snapshot.id]), "teammate cleanup"
            )
        except Exception as exc:
            return [exc]
        return []
