"""What an editor sees of a run: committed events as Agent Client Protocol ``session/update`` payloads.

The mapping is one pure function, :func:`event_updates`, used for both a live run
and the replay of a stored one (``session/load`` replays the Lead's log and its
members' logs, merged in commit order), so a loaded run reads as it did live:

* the Lead's assistant text is an **agent message chunk** (one per model step);
  a replayed user line is a **user message chunk** (live, the editor already
  shows what its user typed);
* every **tool call** of every agent is a ``tool_call`` (``pending``) whose title
  starts with the member that made it (``builder: write_file src/greet.py``),
  then ``in_progress`` when its body starts (:meth:`ToolCalls.started`) and
  ``completed`` or ``failed`` with its result text; a call a permission rule
  asks about gets a ``pending`` update saying it waits for permission (its
  ``tool/permission`` ``asked`` mark); call ids are
  ``<session id>:<call id>``, unique over the whole Team;
* members' activity (their assistant text, the Team mail they and the Lead
  receive, a turn that ended abnormally, a compaction) is an **agent thought
  chunk** in the transcript's member-prefixed lines
  (:func:`~host_spec.host.cli.transcript.render_event`).

The board is not an event mapping: :mod:`host_spec.host.acp.progress` sends it as
the plan.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

import acp
from acp.schema import ToolKind

from host_spec.events import Event, EventType, json_decode
from host_spec.messages import message_text
from host_spec.permissions import TOOL_PERMISSION

from host_spec.host.cli.transcript import render_event

__all__ = ["RESULT_CHARS", "TITLE_CHARS", "Update", "ToolCalls", "call_title", "event_updates", "tool_call_id",
           "tool_kind"]

#: Characters of a tool result shown in the editor (the log keeps it whole).
RESULT_CHARS: Final = 4000
#: Characters of a tool call's title after the member and tool names.
TITLE_CHARS: Final = 80

#: One ``session/update`` payload.
Update = Any

_KINDS: Final[dict[str, ToolKind]] = {
    "read_file": "read", "write_file": "edit", "edit_file": "edit", "glob": "search", "grep": "search",
    "list_dir": "search", "bash": "execute",
}
#: The argument a title shows, per tool (the first one present).
_TITLE_ARGUMENTS: Final = ("path", "pattern", "command", "name", "target", "task_id", "subject")


def tool_kind(name: str) -> ToolKind:
    """The editor's icon for a tool: read, edit, search, execute, else other."""
    return _KINDS.get(name, "other")


def tool_call_id(session_id: str, call_id: str) -> str:
    """A tool call's id for the editor, unique over every session of the Team."""
    return f"{session_id}:{call_id}"


def _arguments(text: str) -> Any:
    try:
        return json_decode(text.encode())
    except Exception:
        return text  # a model's malformed arguments are shown as written


def call_title(member: str, tool: str, arguments: Any) -> str:
    """``member: tool detail``: the member, the tool, and the call's telling argument, shortened."""
    detail = ""
    if isinstance(arguments, dict):
        for key in _TITLE_ARGUMENTS:
            value = arguments.get(key)
            if isinstance(value, str) and value:
                detail = " " + " ".join(value.split())
                break
    if len(detail) > TITLE_CHARS:
        detail = detail[: TITLE_CHARS - 3] + "..."
    return f"{member}: {tool}{detail}"


def _thought(name: str, event: Event) -> list[Update]:
    lines = render_event(name, event)
    return [acp.update_agent_thought_text("\n".join(lines) + "\n")] if lines else []


def event_updates(name: str, session_id: str, event: Event, *, lead: bool, replay: bool = False) -> list[Update]:
    """The updates one committed event of agent ``name`` shows (none for bookkeeping events).

    Args:
        name: The agent's Team name (``lead``, ``builder``): tool titles and thoughts start with it.
        session_id: The agent's session (tool call ids are unique per session).
        event: The committed event.
        lead: Whether it is the root's (the Lead's) event: its text is the agent's message.
        replay: A stored event replayed by ``session/load`` (the user's lines are shown too).
    """
    kind = event.type
    if kind == EventType.TOOL_CALL:
        value = event.value()
        arguments = _arguments(str(value.get("arguments") or "{}"))
        tool = str(value.get("name"))
        return [acp.start_tool_call(tool_call_id(session_id, str(value.get("call_id"))), call_title(name, tool, arguments),
                                    kind=tool_kind(tool), status="pending", raw_input=arguments)]
    if kind == EventType.TOOL_RESULT:
        value = event.value()
        text = message_text(value.get("content") or [])
        if len(text) > RESULT_CHARS:
            text = text[:RESULT_CHARS] + f"\n... ({len(text) - RESULT_CHARS} more characters in the log)"
        failed = bool(value.get("is_error"))
        code = (value.get("error") or {}).get("code") if failed else None
        if code and not text.startswith(str(code)):
            text = f"{code}: {text}"  # the editor shows the typed code first, as dsh prints errors
        return [acp.update_tool_call(tool_call_id(session_id, str(value.get("call_id"))),
                                     status="failed" if failed else "completed",
                                     content=[acp.tool_content(acp.text_block(text))] if text else None,
                                     raw_output=value.get("error") if failed else None)]
    if kind == TOOL_PERMISSION:
        value = event.value()
        if value.get("phase") != "asked":
            return []  # allowed: the call's in_progress (body started) or its result follows
        return [acp.update_tool_call(tool_call_id(session_id, str(value.get("call_id"))), status="pending",
                                     content=[acp.tool_content(acp.text_block(
                                         f'waiting for permission (rule "{value.get("rule")}")'))])]
    if kind == EventType.ASSISTANT_MESSAGE and lead:
        text = message_text(event.value().get("content") or [])
        return [acp.update_agent_message_text(text + "\n\n")] if text.strip() else []
    if kind == EventType.USER_MESSAGE and lead:
        value = event.value()
        if (value.get("source") or {}).get("kind", "user") == "user":
            text = message_text(value.get("content") or [])
            return [acp.update_user_message_text(text)] if replay and text else []
    return _thought(name, event)


class ToolCalls:
    """The calls each agent has recorded but not started, to mark one ``in_progress`` when its body starts.

    ``dsh_tool_pre_call`` names the agent and the tool, not the call: the oldest
    recorded call of that tool by that agent is the one starting (an agent runs
    the calls of one step in order).
    """

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], deque[str]] = {}

    def recorded(self, agent_id: str, tool: str, call_id: str) -> None:
        self._waiting.setdefault((agent_id, tool), deque()).append(call_id)

    def started(self, agent_id: str, tool: str) -> Update | None:
        """The ``in_progress`` update of the call starting now (``None``: none recorded)."""
        waiting = self._waiting.get((agent_id, tool))
        if not waiting:
            return None
        call_id = waiting.popleft()
        if not waiting:
            del self._waiting[(agent_id, tool)]
        return acp.update_tool_call(call_id, status="in_progress")

    def finished(self, agent_id: str, tool: str, call_id: str) -> None:
        """A result arrived (a call refused before its body never starts)."""
        waiting = self._waiting.get((agent_id, tool))
        if waiting and call_id in waiting:
            waiting.remove(call_id)
            if not waiting:
                del self._waiting[(agent_id, tool)]
