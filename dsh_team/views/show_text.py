"""The human-readable rendering of a :class:`~dsh_team.views.show.TeamShow` (``dsh team show``).

Eight blocks -- header, roster, board, pending mail, message statuses, quiescence, writes, cost -- in fixed-width tables, so a
person can scan a Team at a glance and a failure is the first thing they read.
Nothing here decides anything: every value comes from the view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from dsh_team.cost.report import CostReport
from dsh_team.views.controls import render_controls
from dsh_team.worktrees.report import render_worktrees
from dsh_team.views.permissions import render_permissions
from dsh_team.views.show import ShowMember, TeamShow

__all__ = ["render_text"]

_PREVIEW: Final = 72
_LISTED: Final = ("pending", "in_progress", "completed")


def _table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in (headers, *rows)) for i in range(len(headers))]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in (headers, *rows)]


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 3] + "..."


def _mode(show: TeamShow) -> str:
    if show.enabled is None:
        return "not selected (the profile's team_mode_default decides)"
    return "on" if show.enabled else "off"


def _header(show: TeamShow) -> list[str]:
    where = f"seq {show.at} of {show.log_length}" if show.at != show.log_length else f"all {show.log_length} events"
    lines = [f"Team {show.team_id}  (Lead log: {where}; last Team record at seq {show.position})"]
    if show.session_id != show.team_id:
        lines.append(f"(session {show.session_id} is a member of this Team)")
    if show.failure is not None:
        what = "Team stream failed" if show.failure.source == "team" else "Lead log is damaged"
        lines.append(f"FAILURE ({what} at seq {show.failure.seq}): {show.failure.message}")
        lines.append(f"Showing the last valid state, before seq {show.failure.seq}.")
    lines.append(f"Team mode: {_mode(show)}")
    lines.append("Offline view: no process is attached, so active members and the Lead show as inactive.")
    return lines


def _tokens(member: ShowMember) -> str:
    """``in/out`` tokens (``+N cached`` where reported; ``-`` when nothing was recorded),
    then ``(N compacted)`` when the member's context was compacted."""
    usage = member.usage
    if usage is None:
        return "-"
    cached = f" +{usage.cached_tokens} cached" if usage.cached_tokens else ""
    tokens = f"{usage.input_tokens}/{usage.output_tokens}{cached}" if usage.calls else "-"
    return tokens + (f" ({usage.compactions} compacted)" if usage.compactions else "")


def _members(show: TeamShow) -> list[str]:
    rows = [
        (m.name, m.role, m.status, m.context or "-", m.provider or "-", str(m.pending_mail), str(m.unread_mail),
         (m.usage.model if m.usage is not None else None) or "-", _tokens(m), _charged(show, m.id), m.description or "")
        for m in show.members
    ]
    lines = [f"Members ({len(show.members)})"]
    headers = ("NAME", "ROLE", "STATUS", "CONTEXT", "PROVIDER", "MAIL", "UNREAD", "MODEL", "TOKENS IN/OUT", "ON TASKS", "DESCRIPTION")
    lines += _table(headers, rows)
    lines += [f"    {m.name}: error: {m.error}" for m in show.members if m.error]
    return lines


def _tasks(show: TeamShow) -> list[str]:
    if not show.tasks:
        return ["Tasks (0)", "  (no tasks)"]
    counts = {status: sum(1 for t in show.tasks if t.status == status) for status in _LISTED}
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    rows = [
        (t.id, str(t.revision), t.status, t.owner_name or t.owner_id or "-", "yes" if t.ready else "no",
         ", ".join(t.blocked_by) or "-", _charged(show, t.id, by_task=True), t.subject)
        for t in show.tasks
    ]
    lines = [f"Tasks ({len(show.tasks)}: {summary})"]
    lines += _table(("ID", "REV", "STATUS", "OWNER", "READY", "BLOCKED BY", "TOKENS", "SUBJECT"), rows)
    for task in show.tasks:
        if task.write_scopes:
            lines.append(f"    {task.id}: write scopes: {', '.join(task.write_scopes)}")
        lines += [f"    {task.id}: warning: {warning}" for warning in task.write_scope_warnings]
    return lines


def _mail(show: TeamShow) -> list[str]:
    lines = [f"Pending mail ({len(show.pending_mail)} queued, not yet delivered)"]
    if not show.pending_mail:
        return [*lines, "  (none)"]
    for message in show.pending_mail:
        target = message.target_name or message.target_id
        lines.append(f"  {message.sender_name} -> {target}  [{message.id}]  {_preview(message.text)}")
    return lines


def _messages(show: TeamShow) -> list[str]:
    lines = [f"Messages ({len(show.messages)} most recent: queued, delivered or read)"]
    if not show.messages:
        return [*lines, "  (none)"]
    rows = [(m.sender_name, m.target_name or m.target_id, m.status, m.id) for m in show.messages]
    return lines + _table(("FROM", "TO", "STATUS", "ID"), rows)


def _quiescence(show: TeamShow) -> list[str]:
    quiet = show.quiescence
    if quiet is None:
        return ["Quiescence", "  (none recorded)"]
    since = "nothing changed since" if quiet.current else "the Team changed since"
    lines = [f"Quiescence (last at seq {quiet.seq}; {since})"]
    stalled = [f"  in progress: {t.id} (owner {t.owner_name or t.owner_id})" for t in quiet.in_progress]
    stalled += [f"  ready, unclaimed: {task_id}" for task_id in quiet.ready]
    stalled += [f"  failed member: {name}" for name in quiet.failed]
    return lines + (stalled or ["  nothing stalled"])


def _writes(show: TeamShow) -> list[str]:
    outside = sum(1 for write in show.writes if write.in_scope is False)
    lines = [f"Writes ({len(show.writes)}; {outside} outside the writer's task scopes)"]
    if not show.writes:
        return [*lines, "  (none)"]
    rows = [
        (w.member, w.path, w.tool, ", ".join(w.tasks) or "-", "-" if w.in_scope is None else "yes" if w.in_scope else "NO")
        for w in show.writes
    ]
    lines += _table(("MEMBER", "PATH", "TOOL", "TASKS", "IN SCOPE"), rows)
    for write in show.writes:
        lines += [f"    {write.member} {write.path}: warning: {warning}" for warning in write.warnings]
    return lines


def _charged(show: TeamShow, key: str, by_task: bool = False) -> str:
    """Tokens the Lead log charged to a member's tasks (or to a task); ``-`` when none or no cost section."""
    costs = show.costs
    if costs is None:
        return "-"
    if by_task:
        spend = next((t.spend for t in costs.tasks if t.task_id == key), None)
    else:
        spend = next((m.on_tasks for m in costs.members if m.member_id == key), None)
    return str(spend.tokens) if spend is not None and spend.calls else "-"


def _costs(show: TeamShow, costs: CostReport) -> list[str]:
    team = costs.team
    on_tasks = sum(t.spend.tokens for t in costs.tasks)
    lines = [f"Cost: {team.tokens} tokens in {team.calls} model calls ({on_tasks} charged to tasks, the rest to members)"]
    if costs.failure is not None:
        lines.append(f"  FAILURE (cost ledger): {costs.failure}")
    lines += [
        f"    {m.name}: {m.uncharged.tokens} tokens in {m.uncharged.calls} calls not charged yet (charged at its next start)"
        for m in costs.members if m.uncharged is not None and m.uncharged.calls
    ]
    listed = {task.id for task in show.tasks}
    lines += [f"    {t.task_id} (deleted): {t.spend.tokens} tokens" for t in costs.tasks if t.task_id not in listed]
    for limit in costs.reached:
        who = limit.name or limit.member_id or "the Team"
        lines.append(f"    budget reached at seq {limit.seq}: {who} {limit.kind} {limit.used} of {limit.value}")
    return lines


def render_text(show: TeamShow) -> str:
    """The human-readable view: header, roster, board, pending mail, message statuses, quiescence, writes, cost,
    controls, worktrees."""
    blocks = [
        _header(show), _members(show), _tasks(show), _mail(show), _messages(show), _quiescence(show), _writes(show),
    ]
    if show.costs is not None:
        blocks.append(_costs(show, show.costs))
    if show.controls is not None:
        blocks.append(render_controls(show.controls))
    if show.worktrees is not None:
        blocks.append(render_worktrees(show.worktrees))
    if show.permissions is not None:
        blocks.append(render_permissions(show.permissions))
    return "\n\n".join("\n".join(block) for block in blocks)
