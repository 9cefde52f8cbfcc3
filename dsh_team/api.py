"""``TeamServiceAPI``: what the Team service promises its callers (tools, remote view, web).

A Protocol rather than the concrete :class:`~dsh_team.service.TeamService`, so a
caller depends on the operations and their result types, never on how the
service is wired, and a test double or another implementation can stand in.

Every method takes the exact live calling agent as its credential: membership is
resolved again on each call, so a stale or copied agent object is no member.
Mutations return only once their record is durable; a failed flush raises
:class:`~dsh_team.errors.UnconfirmedError` (the change is visible, read before
retrying).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from host_spec.messages import ContentBlock
    from host_spec.protocols import Agent
    from host_spec.records import AbortSignal, Handle

    from dsh_team.controls.ledger import ControlsState
    from dsh_team.permissions.ledger import Ask, PermissionsState
    from dsh_team.core.task_view import TaskView
    from dsh_team.cost.report import MemberCost
    from dsh_team.log.waits import WaitResult
    from dsh_team.mail.send import SendResult
    from dsh_team.log.membership import Membership
    from dsh_team.roster.roster import InterruptResult, MemberView
    from dsh_team.core.team_view import TeamView

__all__ = ["TeamServiceAPI"]


@runtime_checkable
class TeamServiceAPI(Protocol):
    """The Team operations. Argument values are checked by the service (typed errors).

    Errors are :class:`~dsh_team.errors.TeamError` with a stable code; the
    docstrings of :class:`~dsh_team.service.TeamService` list them per method.
    """

    def membership(self, agent: Agent) -> Membership:
        """The caller's Team membership (``TEAM_NOT_MEMBER`` otherwise)."""
        ...

    def try_membership(self, agent: Agent) -> Membership | None:
        """The caller's membership, or ``None``; never raises."""
        ...

    def position(self, caller: Agent) -> int:
        """The Team's last durable change (a Lead log seq): what a read made now reflects."""
        ...

    def list_members(self, caller: Agent) -> list[MemberView]:
        """The Lead row, then every teammate ever provisioned, in creation order."""
        ...

    def member_costs(self, caller: Agent) -> dict[str, MemberCost]:
        """Spend per member id of the caller's Team, and whether a budget refuses each member."""
        ...

    async def spawn_teammate(
        self,
        caller: Agent,
        *,
        name: Any,
        description: Any,
        prompt: Any,
        context: Any = "fresh",
        provider: Any,
        signal: AbortSignal | None = None,
        plan_approval: Any = None,
        role: Any = None,
    ) -> MemberView:
        """Create a named continuable teammate (Lead only), optionally with a role preset.

        ``plan_approval``: it plans before it may write.
        """
        ...

    async def plan_step(
        self, caller: Agent, *, plan: Any, target: Any, text: Any, by: Literal["lead", "user"] = "lead",
        signal: AbortSignal | None = None,
    ) -> SendResult:
        """Submit a plan (``submit``, teammate to ``lead``) or decide on one (``approve``/``reject``, Lead)."""
        ...

    async def answer_permission(
        self, caller: Agent, *, ask_id: Any, answer: Any, reason: Any = "", by: Literal["lead", "user"] = "lead"
    ) -> Ask:
        """Answer a permission ask once: the Lead a delegated one (``by="lead"``), the user any (``by="user"``)."""
        ...

    def permissions_state(self, caller: Agent) -> PermissionsState:
        """Every permission ask of the caller's Team and its answer."""
        ...

    def controls_state(self, caller: Agent) -> ControlsState:
        """The gate runs and plan approvals of the caller's Team."""
        ...

    def control_choices(self, caller: Agent) -> dict[str, list[str]]:
        """The ``role``, ``plan`` and ``shutdown`` values the caller could send right now (a hint)."""
        ...

    def tool_allowlist(self, agent: Agent) -> frozenset[str] | None:
        """The non-Team tools a member's role allows, or ``None`` (no restriction)."""
        ...

    async def send_message(
        self, caller: Agent, *, target: Any, content: Sequence[ContentBlock], signal: AbortSignal | None = None
    ) -> SendResult:
        """Queue a peer message durably and try to deliver it."""
        ...

    async def send_from_user(self, lead: Agent, target: Any, text: Any) -> SendResult:
        """Queue the user's message to a teammate (or ``lead``); ``lead`` is the Lead's live agent."""
        ...

    async def request_shutdown(self, caller: Agent, target: Any, text: Any) -> SendResult:
        """Ask a teammate to shut down (Lead only); it answers at its next step."""
        ...

    async def answer_shutdown(self, caller: Agent, approve: bool, text: Any) -> SendResult:
        """A teammate approves (released when its turn ends) or declines its open shutdown request."""
        ...

    def interrupt(self, caller: Agent, target: Any) -> InterruptResult:
        """Cancel an active teammate's current turn, keeping its inbox (Lead only)."""
        ...

    def list_tasks(self, caller: Agent) -> list[TaskView]:
        """Non-deleted tasks in board (creation) order."""
        ...

    def get_task(self, caller: Agent, task_id: Any) -> TaskView:
        """One task, deleted tombstones included."""
        ...

    async def create_task(
        self, caller: Agent, *, subject: Any, description: Any, blocked_by: Any = None, write_scopes: Any = None,
        checks: Any = None,
    ) -> TaskView:
        """Create an unowned pending task (``checks``: its quality gates); returns its revision-1 view once durable."""
        ...

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
        """Compare-and-set one authorized transition; a gated ``complete`` runs its checks first."""
        ...

    async def wait_for_change(
        self, caller: Agent, timeout_ms: Any, *, since: Any = None, signal: AbortSignal | None = None
    ) -> WaitResult:
        """Wait for the caller's Team to change, or return at once after ``since``.

        Ends with ``reason="quiescent"`` and the stalled work when nothing can change.
        """
        ...

    def is_enabled(self, caller: Agent) -> bool:
        """Team mode of the caller's tree."""
        ...

    async def set_enabled(self, root: Agent, enabled: Any) -> None:
        """Save a root's Team mode; in force at once, returns once durable."""
        ...

    def view(self, agent: Agent) -> TeamView:
        """The browser view of the caller's Team."""
        ...

    def subscribe(self, listener: Callable[[str, TeamView], None]) -> Handle:
        """Receive every changed Team view ``(team_id, view)`` until the handle is disposed."""
        ...

