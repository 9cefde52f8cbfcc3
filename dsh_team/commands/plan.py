"""``dsh team plan``: the user approves or rejects a teammate's plan while no run is live.

::

    dsh team plan approve NAME [--feedback TEXT] [--data-dir D] [SESSION_ID]
    dsh team plan reject NAME --feedback TEXT [--data-dir D] [SESSION_ID]

The decision is the same one the Lead (or the web panel) takes in a live run,
decided by the same pure rule (:func:`~dsh_team.controls.plans.decide_plan`) on
the Lead log folded from disk, and written as the same two records: the
``team/plan`` step and the Team message from the Lead that tells the teammate.
Both are decided from the folded Lead log by the rules the invariant plugin holds
them to (the plan step's state, the message's queue index), on the log as read
under the session's lock, and appended as one durable batch through the host's
CLI write (:meth:`host_spec.cli.CliEnv.open_appender`), which a live run
refuses (``TEAM_RUN_LIVE``, naming the panel to decide from instead). ``dsh resume``
then delivers the message (queued mail is retried when the Lead starts) and the
teammate continues with its write tools free, or with the feedback.
"""

from __future__ import annotations

import uuid
from typing import Any

from host_spec.cli import CliEnv
from host_spec.errors import SessionLockedError
from host_spec.messages import text_block

from dsh_team.controls.ledger import replay_controls
from dsh_team.controls.plans import active_teammate, decide_plan, notice, step_action
from dsh_team.controls.records import TEAM_PLAN
from dsh_team.core.fold import replay
from dsh_team.core.records import TEAM_MESSAGE_QUEUED, VERSION, MessageQueuedRecord
from dsh_team.core.snapshots import TeamMessageSnapshot
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.errors import TeamCode, TeamError
from dsh_team.mail.framing import MESSAGE_ID_PREFIX
from dsh_team.commands.send import run_live

__all__ = ["register_plan", "plan_command"]


def register_plan(commands: Any, env: CliEnv) -> None:
    """Add ``team plan`` to the ``dsh team`` sub-parsers."""
    plan = commands.add_parser(
        "plan", help="approve or reject a teammate's submitted plan (no run live)",
        description="Approve or reject a plan-gated teammate's submitted plan in a stored run; "
                    "dsh resume then tells the teammate.",
    )
    env.add_data_dir(plan)
    plan.add_argument("decision", choices=("approve", "reject"))
    plan.add_argument("member", help="the teammate's name")
    plan.add_argument("--feedback", default="", help="what the teammate is told with the decision")
    plan.add_argument("session_id", nargs="?", default=None, help="Lead session id (default: the most recent root)")
    plan.set_defaults(dsh_handler=lambda args: plan_command(args, env))


async def plan_command(args: Any, env: CliEnv) -> int:
    """Decide, check, append; prints what the teammate will be told.

    Raises:
        TeamError: ``TEAM_PLAN_INVALID`` (no submitted plan of that member),
            ``TEAM_MEMBER_NOT_FOUND``, ``TEAM_STREAM_FAILED``.
        DshError: ``TEAM_RUN_LIVE`` while a run is live (decide from its web panel); the host's
            data-dir and session errors.
    """
    reader = env.open_store(args.data_dir)
    team_id = args.session_id or reader.latest_root()
    try:
        appender = env.open_appender(args.data_dir, team_id)
    except SessionLockedError:
        raise run_live(team_id, "approve or reject from its web panel's Controls card") from None
    try:
        events = appender.events
        state, controls = replay(events, team_id), replay_controls(events, team_id)
        if state.failure is not None or controls.failure is not None:
            raise TeamError("the Team's log does not fold: nothing is decided on it", TeamCode.STREAM_FAILED)
        action = step_action(args.decision, args.feedback)
        record = decide_plan(state, controls, team_id, args.member, action, "user", args.feedback)
        member = active_teammate(state, record.member)
        _, text = notice(action, member.name, args.feedback)
        message = TeamMessageSnapshot(
            id=f"{MESSAGE_ID_PREFIX}{uuid.uuid4()}", sender_id=team_id, sender_name=LEAD_NAME, target_id=member.id,
            content=(text_block(text),),
        )
        queued = MessageQueuedRecord(version=VERSION, team_id=team_id, message=message, index=state.mail.next_index)
        appender.extend([(TEAM_PLAN, record), (TEAM_MESSAGE_QUEUED, queued)])
    finally:
        appender.close()
    print(f"plan of {member.name}: {action} by the user; {member.name} is told when the run resumes (dsh resume)")
    return 0
