"""Team mode: a root's on/off selection, shared by its whole agent tree.

The selection is a ``team/mode`` record in the root's own log, so it survives a
restart and a fork does not inherit it (the fold ignores other Teams' records).
It takes effect when appended (synchronously, before the flush is awaited): tool
availability is decided at step preparation, so the very next step already sees
it. Only the root may set it. A failed flush leaves the appended selection in
force; retrying the same selection appends nothing and flushes again.

Without any selection a root is on by ``TeamConfig.team_mode_default``, or
because it already has Team records (see :func:`dsh_team.core.state.mode_enabled`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh_team.errors import TeamCode, TeamError
from dsh_team.core.records import TEAM_MODE, VERSION, ModeRecord
from dsh_team.log.journal import Append
from dsh_team.log.journals import Journals
from dsh_team.core.state import TeamState, mode_enabled

if TYPE_CHECKING:
    from host_spec.protocols import Agent
    from dsh_team.log.membership import MembershipResolver

__all__ = ["ModeControl"]


class ModeControl:
    """``is_enabled`` / ``set_enabled`` over the roots' journals.

    Args:
        members: Resolves live agents and their tree roots.
        journals: The per-session journals (the root's holds the selection).
        default: ``TeamConfig.team_mode_default``.
    """

    def __init__(self, members: MembershipResolver, journals: Journals, default: bool) -> None:
        self.members = members
        self.journals = journals
        self.default = default

    def is_enabled(self, caller: Agent, known: tuple[Agent, TeamState] | None = None) -> bool:
        """Whether Team tools and guidance are on for ``caller``'s tree (``False`` for a stale agent).

        ``known``: an agent and its folded state the caller already holds; when it
        is the tree's root its state is used instead of looking the journal up.
        """
        root = self.members.root_of(caller)
        if root is None:
            return False
        if known is not None and known[0] is root:
            return mode_enabled(known[1], self.default)
        return mode_enabled(self.journals.get(root.session).state, self.default)

    def require_enabled(self, caller: Agent, known: tuple[Agent, TeamState] | None = None) -> None:
        """Raise unless Team mode is on for ``caller``'s tree (``known``: see :meth:`is_enabled`).

        Raises:
            TeamError: ``TEAM_MODE_DISABLED``.
        """
        if not self.is_enabled(caller, known):
            raise TeamError("Team mode is switched off for this session tree", TeamCode.MODE_DISABLED)

    async def set_enabled(self, root: Agent, enabled: Any) -> None:
        """Record ``root``'s selection and wait until it is durable.

        Raises:
            TeamError: ``TEAM_INVALID_ARGUMENT`` (not a bool), ``TEAM_NOT_MEMBER`` (not
                a live agent), ``TEAM_LEAD_REQUIRED`` (a descendant), ``TEAM_STREAM_FAILED``,
                ``TEAM_PERSISTENCE_UNCONFIRMED`` (the selection is in force but
                its flush failed; retry to flush it).
        """
        if type(enabled) is not bool:
            raise TeamError("enabled must be a boolean", TeamCode.INVALID_ARGUMENT)
        found = self.members.root_of(root)
        if found is None:
            raise TeamError("caller is not a live agent", TeamCode.NOT_MEMBER)
        if found is not root:
            raise TeamError("only the root session can change Team mode", TeamCode.LEAD_REQUIRED)

        def decide(state: TeamState) -> Append | None:
            if state.mode is enabled:
                return None  # already selected: only flush (retries an unconfirmed append)
            return Append(TEAM_MODE, ModeRecord(version=VERSION, team_id=root.id, enabled=enabled))

        journal = self.journals.get(root.session)
        await journal.transact(decide, what=f"Team mode selection of {root.id}")
