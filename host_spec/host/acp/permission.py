"""The seam for permission asks: one ``session/request_permission`` to the editor, the user's choice back.

A permission ask is a durable record (``permission/requested``, then
``permission/answered``, architecture §11); the editor is one more place its
answer may come from. :func:`ask_editor` is the whole protocol side of that: it
shows the editor the tool call the ask is about and the options, and returns the
option the user picked, or ``None`` when the ask was cancelled (the prompt was
cancelled, the editor closed the dialog). Recording the answer is the caller's:
this module writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from acp.schema import PermissionOption, ToolCallUpdate

from host_spec.errors import DshError

__all__ = ["ALLOW_ONCE", "REJECT_ONCE", "DEFAULT_OPTIONS", "PermissionAnswerError", "ask_editor"]

ALLOW_ONCE: Final = "allow-once"
REJECT_ONCE: Final = "reject-once"
#: What the editor offers unless the caller says otherwise.
DEFAULT_OPTIONS: Final = (
    PermissionOption(option_id=ALLOW_ONCE, name="Allow", kind="allow_once"),
    PermissionOption(option_id=REJECT_ONCE, name="Deny", kind="reject_once"),
)


class PermissionAnswerError(DshError):
    """The editor answered with an option it was not offered."""

    code = "ACP_PERMISSION_ANSWER_INVALID"


async def ask_editor(
    client: Any,
    session_id: str,
    *,
    tool_call_id: str,
    title: str,
    options: Sequence[PermissionOption] = DEFAULT_OPTIONS,
    raw_input: Any = None,
) -> str | None:
    """Ask the editor's user; the chosen option id, or ``None`` when the ask was cancelled.

    Args:
        client: The agent side's connection to the editor (``acp.Client``: ``request_permission``).
        session_id: The editor session the ask belongs to.
        tool_call_id: The tool call the ask is about (as its ``tool_call`` update named it).
        title: What the user is asked, e.g. ``builder: bash rm -rf build``.
        options: The choices (default: allow once, deny).
        raw_input: The call's arguments, shown by editors that show them.

    Raises:
        PermissionAnswerError: ``ACP_PERMISSION_ANSWER_INVALID``, the editor chose an option not offered.
    """
    response = await client.request_permission(
        session_id=session_id,
        tool_call=ToolCallUpdate(tool_call_id=tool_call_id, title=title, status="pending", raw_input=raw_input),
        options=list(options),
    )
    outcome = response.outcome
    if outcome.outcome != "selected":
        return None
    offered = [option.option_id for option in options]
    if outcome.option_id not in offered:
        raise PermissionAnswerError(f"the editor chose option {outcome.option_id!r}, offered were {offered}")
    return str(outcome.option_id)
