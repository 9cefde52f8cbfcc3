"""``TeamService``: the Agent Teams service, found by plugins and tools as ``TeamServiceAPI``.

Every method takes the exact live calling agent as its credential and resolves
its membership again (a stale object is no member). Reads come from the Lead's
incrementally folded state; mutations go through the Lead's journal (serialized
read-check-append, shared flush, waiters told after the flush).

The service is also the ``dsh-team`` plugin object: the host feeds it through the
hooks of :class:`~dsh_team.host_feed.HostFeed` (session events, flushes, status
changes, teardown). The roster and mailbox operations (``list_members``,
``spawn_teammate``, ``send_message``, ``interrupt``) are
:class:`~dsh_team.member_operations.MemberOperations`, carried out by
:mod:`dsh_team.coordination` and its rooms; the task board's reads and
compare-and-set mutations are :class:`~dsh_team.board_operations.BoardOperations`;
they share the journal, membership, activity and lifecycle built here.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from host_spec.records import AbortSignal, Handle
from host_spec.storage import CheckpointedSessions

from dsh_team.checkpoint.folds import LiveFolds
from dsh_team.checkpoint.keeper import CheckpointKeeper

from dsh_team.permissions import Ask, LivePermissions, PermissionRoutes, PermissionsState
from dsh_team.controls.gates import Gates
from dsh_team.controls.ledger import LiveControls
from dsh_team.controls.operations import ControlOperations
from dsh_team.controls.plans import Plans
from dsh_team.host_feed import HostFeed
from dsh_team.board_operations import BoardOperations
from dsh_team.member_operations import MemberOperations
from dsh_team.log.quiescence import QuiescenceWatch, quiet_result
from dsh_team.log.waits import Activity, Timer, WaitResult, check_since, check_timeout
from dsh_team.config import TeamConfig
from dsh_team.errors import TeamCode, TeamError
from dsh_team.coordination import Coordination
from dsh_team.cost.costs import TeamCosts
from dsh_team.log.journal import Journal
from dsh_team.log.journals import Journals
from dsh_team.log.lead_fold import TeamFolds
from dsh_team.mail.holdings import asleep_with_work
from dsh_team.log.lifecycle import Lifecycle
from dsh_team.log.membership import Membership, MembershipResolver, TeammateResolver, roster_teammate
from dsh_team.roster.roles import check_roles
from dsh_team.mode import ModeControl
from dsh_team.core.team_view import TeamView
from dsh_team.views.projection import Publisher, ViewListener
from dsh_team.views.cursor import CursorDeltas
from dsh_team.views.remote import RemoteTeam
from dsh_team.core.state import TeamState, mode_enabled
from dsh_team.worktrees.merge import Merges

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host, Session

__all__ = ["TeamService"]


class TeamService(MemberOperations, BoardOperations, ControlOperations, HostFeed):
    """The Team domain service.

    Args:
        host: A ``host_spec.protocols.Host`` (only ``agents`` is used here).
        config: Validated limits (default :class:`TeamConfig`).
        timer: Timeout scheduler for waits (tests pass a faster clock).
        teammate: The teammate-resolution seam of membership.

    Attributes:
        remote: The browser remote operations (:class:`RemoteTeam`).
    """

    def __init__(
        self,
        host: Host,
        config: TeamConfig | None = None,
        *,
        timer: Timer | None = None,
        teammate: TeammateResolver = roster_teammate,
    ) -> None:
        self.host = host
        self.config = config if config is not None else TeamConfig()
        check_roles(self.config.roles)  # the table's shape first: named before the host is asked anything
        check_roles(self.config.roles, host.continuations)  # then each role's model, as the host serves it
        self.lifecycle = Lifecycle(self.config.disposal_timeout_ms)
        self.activity = Activity(timer)
        self.publisher = Publisher()
        self.journals = Journals(
            on_change=self._changed, on_durable=self._durable, folds=partial(host.find_service, TeamFolds)
        )
        self.members = MembershipResolver(host.agents, self._state_of, teammate)
        self.mode = ModeControl(self.members, self.journals, self.config.team_mode_default)
        self.remote = RemoteTeam(self)
        self.coordination = Coordination(
            host, self.config, self.journals, self.members, self.lifecycle, on_recovered=self._may_be_quiet
        )
        self.cursors = CursorDeltas(self.journals, self.members, self.coordination.roster)
        self.costs = TeamCosts(
            host, self.config.budget, self.journals, self.members, self.coordination.messages, self.activity.notify
        )
        self.controls = LiveControls()
        self.gates = Gates(host, self.config, self.journals, self.controls, self.lifecycle,
                           self.coordination.worktrees.workspace, self.coordination.role_of)
        self.merges = Merges(self.coordination.worktrees, self.lifecycle, host.call_soon)
        self.plans = Plans(self.controls)
        self.permissions = LivePermissions()
        self.asks = PermissionRoutes(
            host, self.journals, self.members, self.lifecycle, self.coordination.sender, self.permissions
        )
        self.quiescence = QuiescenceWatch(
            host, self.journals, self.lifecycle, self.activity.parked, partial(asleep_with_work, host.sessions)
        )
        self.folds = LiveFolds(
            self.journals, self.controls, self.permissions, self.costs.ledgers, self.coordination.roles,
            self.coordination.shutdowns.book, self.coordination.worktrees.book, self.merges.book,
        )
        sessions = host.sessions
        self.checkpoints = CheckpointKeeper(
            sessions.checkpoints if isinstance(sessions, CheckpointedSessions) else None,
            self.config.checkpoint_every,
            self.folds.capture,
        )

    # ------------------------------------------------------------ internals

    def _state_of(self, session: Session) -> TeamState:
        # Membership reads the last valid roster even of a failed stream, so members keep
        # their tools and learn of the failure (TEAM_STREAM_FAILED) from every Team call.
        return self.journals.get(session).state

    def _lead(self, membership: Membership) -> Journal:
        return self.journals.get(membership.root.session)

    # ------------------------------------------------------------ membership

    def membership(self, agent: Agent) -> Membership:
        """The caller's Team membership.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``.
        """
        return self.members.resolve(agent)

    def try_membership(self, agent: Agent) -> Membership | None:
        """The caller's membership or ``None``; never raises."""
        return self.members.try_resolve(agent)

    def position(self, caller: Agent) -> int:
        """The Team's last durable change (a Lead log seq): what a read made now reflects.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``.
        """
        return self._lead(self.membership(caller)).position

    # ------------------------------------------------------------ permission asks

    async def answer_permission(
        self, caller: Agent, *, ask_id: Any, answer: Any, reason: Any = "", by: Literal["lead", "user"] = "lead"
    ) -> Ask:
        """Answer a permission ask of the caller's Team once (the Lead's tool; the user through the Lead).

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``, ``TEAM_LEAD_REQUIRED``, ``TEAM_INVALID_ARGUMENT``,
                ``PERMISSION_NOT_FOUND``, ``PERMISSION_ALREADY_ANSWERED``, ``PERMISSION_NOT_DELEGATED``.
        """
        if not isinstance(ask_id, str) or not isinstance(answer, str) or not isinstance(reason, str):
            raise TeamError("permission, answer and message must be strings", TeamCode.INVALID_ARGUMENT)
        return await self.asks.answer(caller, ask_id, answer, by=by, reason=reason)

    def permissions_state(self, caller: Agent) -> PermissionsState:
        """Every permission ask of the caller's Team and its answer.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``.
        """
        return self.permissions.state(self._lead(self.membership(caller)).session)

    # ------------------------------------------------------------ waiting

    async def wait_for_change(
        self, caller: Agent, timeout_ms: Any, *, since: Any = None, signal: AbortSignal | None = None
    ) -> WaitResult:
        """Wait for the caller's Team to change, or return at once after ``since``.

        A wait that ends because of a change carries the delta after ``since`` (or
        after the position it started from); see :mod:`dsh_team.core.delta`.

        The caller counts as parked while it waits (see :mod:`dsh_team.log.quiescence`):
        when nobody else can change anything the Team records its quiescence and the
        result says ``reason="quiescent"`` with the stalled work; in a Team still that
        quiet the same answer comes at once.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``, ``TEAM_INVALID_TIMEOUT``, ``TEAM_INVALID_ARGUMENT``
                (``since``), ``TEAM_WAIT_ABORTED``; or the signal's own exception reason.
        """
        membership = self.membership(caller)
        check_timeout(timeout_ms)
        check_since(since)
        team_id = membership.team_id
        journal = self._lead(membership)  # the Lead's journal exists before the wait reads its position
        start = self.cursors.opened(journal) if since is None else since

        def position() -> int:
            found = self.journals.find(team_id)
            return found.position if found is not None else 0

        if self.quiescence.settled(journal, also=caller.id):
            since = -1  # recorded quiet and nobody runs: nothing could end this wait
        else:
            self.quiescence.poke(team_id)  # evaluated once this wait is registered
        result = await self.activity.wait(team_id, timeout_ms, position, since=since, signal=signal, member=caller.id)
        if result.timed_out:
            return result
        return quiet_result(journal, msgspec.structs.replace(result, delta=self.cursors.delta(caller, start)))

    # ------------------------------------------------------------ Team mode

    def is_enabled(self, caller: Agent) -> bool:
        """Team mode of the caller's tree (read at step preparation by the tools)."""
        return self.mode.is_enabled(caller)

    async def set_enabled(self, root: Agent, enabled: Any) -> None:
        """Save a root's Team mode; in force at once, returns once durable (see :mod:`.mode`)."""
        await self.mode.set_enabled(root, enabled)

    # ------------------------------------------------------------ browser view

    def view(self, agent: Agent) -> TeamView:
        """The browser view of the caller's Team (memoised; a failed stream shows ``failure``).

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``.
        """
        membership = self.membership(agent)
        state = self._lead(membership).state
        return self.publisher.view(state, mode_enabled(state, self.config.team_mode_default))

    def subscribe(self, listener: ViewListener) -> Handle:
        """Receive every changed Team view ``(team_id, view)`` until the handle is disposed."""
        return self.publisher.subscribe(listener)
