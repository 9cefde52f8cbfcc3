"""The Team's ``dsh chat`` commands: ``/team`` shows the live board, ``/send`` talks to a member.

Contributed through entry-point group ``dsh.chat`` (:mod:`host_spec.chat`), so the
host's chat knows nothing of Teams.

* ``/team`` reads the live Team service as the Lead: the roster (status, model,
  mail on its way or unread) and the board (status, owner, blockers).
* ``/send NAME text`` puts a message from the person at the terminal straight into
  member ``NAME``'s inbox through the host's delivery to a direct child
  (``continuations.deliver``), which cold-resumes a member asleep on disk. It is
  the user speaking, not the Lead: it carries the user source, goes through no
  Team mailbox (the Lead's log does not record it) and the member sees it framed
  as the user's. ``/send lead text`` is the same as typing ``text``.
* ``/permit`` lists the Team's open permission asks; ``/permit ID allow|always|deny
  [reason]`` answers one as the user (the one answer path of the live router:
  exactly once, ``PERMISSION_ALREADY_ANSWERED`` if the Lead or the deadline came
  first). The transcript's ``permission needed`` line is the prompt for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from host_spec.chat import USER_SOURCE, ChatCommand, ChatContext
from host_spec.messages import text_block, user_message

from dsh_team.api import TeamServiceAPI
from dsh_team.core.task_view import LEAD_NAME, TaskView
from dsh_team.errors import TeamCode, TeamError
from dsh_team.permissions.ledger import Ask
from dsh_team.roster.roster import MemberView

__all__ = ["commands", "USER_FRAME", "board_lines", "ask_line"]

#: Opens a message ``/send`` delivers, so the member knows who is speaking.
USER_FRAME: Final = "Message from the user (typed in dsh chat):"
_LIVE: Final = frozenset({"running", "inactive"})


def _member_line(row: MemberView) -> str:
    mail = [f"{count} {what}" for count, what in ((row.pending, "pending"), (row.unread, "unread")) if count]
    extras = f"  ({', '.join(mail)})" if mail else ""
    failed = f"  failed: {'; '.join(row.diagnostics)}" if row.diagnostics else ""
    return f"  {row.name:<12} {row.status:<12} {row.model or '-'}{extras}{failed}"


def _task_line(task: TaskView) -> str:
    owner = task.owner_name or "-"
    blockers = f"  blocked by {', '.join(task.blocked_by)}" if task.blocked_by else ""
    return f"  {task.id:<8} {task.status:<12} {owner:<12} {task.subject}{blockers}"


def board_lines(members: Sequence[MemberView], tasks: Sequence[TaskView]) -> list[str]:
    """What ``/team`` prints: the roster, then the board."""
    lines = ["members:", *(_member_line(row) for row in members), "tasks:"]
    lines += [_task_line(task) for task in tasks] or ["  (none)"]
    return lines


def _team(context: ChatContext, argument: str) -> None:
    service = context.host.service(TeamServiceAPI)
    for line in board_lines(service.list_members(context.root), service.list_tasks(context.root)):
        context.write(line)


async def _send(context: ChatContext, argument: str) -> None:
    name, _, text = argument.partition(" ")
    text = text.strip()
    if not name or not text:
        raise TeamError("usage: /send NAME text", TeamCode.INVALID_ARGUMENT)
    root = context.root
    if name == LEAD_NAME:
        root.followup(user_message(text))
        context.write("(sent to lead)")
        return
    rows = {row.name: row for row in context.host.service(TeamServiceAPI).list_members(root)}
    row = rows.get(name)
    if row is None:
        known = ", ".join(sorted(rows)) or "none"
        raise TeamError(f"no member named {name!r} (members: {known})", TeamCode.MEMBER_NOT_FOUND)
    if row.status not in _LIVE:
        raise TeamError(f"{name} is {row.status}: it cannot take messages", TeamCode.INVALID_TARGET)
    await context.host.continuations.deliver(root, row.id, [text_block(USER_FRAME), text_block(text)],
                                             source=dict(USER_SOURCE), mode="steer", notify=False)
    context.write(f"(sent to {name})")


def ask_line(ask: Ask) -> str:
    """One open ask as ``/permit`` lists it."""
    request = ask.request
    arguments = request.arguments if len(request.arguments) <= 200 else request.arguments[:197] + "..."
    asks = " (delegated to the Lead)" if request.route == "lead" else ""
    return f"  {request.ask_id} {request.member}: {request.tool} {arguments} (rule {request.rule}){asks}"


async def _permit(context: ChatContext, argument: str) -> None:
    service = context.host.service(TeamServiceAPI)
    if not argument:
        open_asks = service.permissions_state(context.root).open_asks()
        for line in [ask_line(ask) for ask in open_asks] or ["  (no open permission asks)"]:
            context.write(line)
        return
    ask_id, _, rest = argument.partition(" ")
    answer, _, reason = rest.strip().partition(" ")
    if not answer:
        raise TeamError("usage: /permit [ID allow|always|deny [reason]]", TeamCode.INVALID_ARGUMENT)
    ask = await service.answer_permission(context.root, ask_id=ask_id, answer=answer, reason=reason.strip(), by="user")
    assert ask.answer is not None  # just answered
    context.write(f"({ask_id} {ask.answer.decision}{' always' if ask.answer.always else ''} by the user)")


def commands() -> list[ChatCommand]:
    """The ``dsh.chat`` entry point of the Team."""
    return [
        ChatCommand("team", "", "show the Team: members and the task board", _team),
        ChatCommand("send", "NAME text", "send text to a member as yourself (it reaches the member directly)", _send),
        ChatCommand("permit", "[ID allow|always|deny [reason]]", "list open permission asks, or answer one", _permit),
    ]
