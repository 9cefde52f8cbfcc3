"""Who is in the Team: membership of live agents, the roster rows, provisioning and crash reconciliation.

Membership (who may call, as Lead or teammate) is :mod:`dsh_team.log.membership`:
every room resolves its callers. Modules: :mod:`.roster`
(roster rows with live status, name rules, interrupt, teardown drain),
:mod:`.provisioning` (``spawn_teammate``'s state machine), :mod:`.reconcile`
(settling provisioning records a crash left open), :mod:`.vetting` (the pre-append check of
the side records: ``team/role``, ``team/shutdown``, ``team/worktree``, ``team/merge``).
"""

from dsh_team.roster.provisioning import Provisioner
from dsh_team.roster.reconcile import reconcile
from dsh_team.roster.roster import NAME_MAX, InterruptResult, MemberStatus, MemberView, RosterService, validate_name
from dsh_team.roster.vetting import SIDE_RECORD_TYPES, side_record_failure

__all__ = [
    "Provisioner",
    "reconcile",
    "NAME_MAX",
    "InterruptResult",
    "MemberStatus",
    "MemberView",
    "RosterService",
    "validate_name",
    "SIDE_RECORD_TYPES",
    "side_record_failure",
]
