"""The ``session/request_permission`` seam, driven through the SDK on both sides over a real socket pair.

:func:`ask_editor` runs on an ``AgentSideConnection`` and the SDK's own
``ClientSideConnection`` answers it, as an editor would: the user allows, denies,
or closes the dialog (``cancelled``). A choice the agent never offered is a typed
error, not an answer.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from acp.core import AgentSideConnection, ClientSideConnection
from acp.schema import PermissionOption
from kit_acp import Editor

from host_spec.host.acp.permission import ALLOW_ONCE, REJECT_ONCE, PermissionAnswerError, ask_editor


class _NoAgent:
    """The agent methods this exchange never calls."""


@asynccontextmanager
async def connected(editor: Editor) -> AsyncIterator[AgentSideConnection]:
    """An agent-side connection whose peer is the SDK's client side answering as ``editor``."""
    agent_end, client_end = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_end)
    client_reader, client_writer = await asyncio.open_connection(sock=client_end)
    agent_side = AgentSideConnection(_NoAgent(), agent_writer, agent_reader)
    client_side = ClientSideConnection(editor, client_writer, client_reader)
    try:
        yield agent_side
    finally:
        await client_side.close()
        await agent_side.close()


async def _ask(editor: Editor, **options: Any) -> str | None:
    async with connected(editor) as conn:
        return await ask_editor(conn, "session-1", tool_call_id="child-1:builder-3.1",
                                title="builder: bash rm -rf build", raw_input={"command": "rm -rf build"}, **options)


async def test_allowed_and_denied_answers_come_back() -> None:
    allowing, denying = Editor(answer=ALLOW_ONCE), Editor(answer=REJECT_ONCE)
    assert await _ask(allowing) == ALLOW_ONCE
    assert await _ask(denying) == REJECT_ONCE
    session_id, tool_call, offered = allowing.asks[0]
    assert session_id == "session-1"
    assert tool_call.tool_call_id == "child-1:builder-3.1" and tool_call.title == "builder: bash rm -rf build"
    assert tool_call.raw_input == {"command": "rm -rf build"}
    assert [(o.option_id, o.kind) for o in offered] == [(ALLOW_ONCE, "allow_once"), (REJECT_ONCE, "reject_once")]


async def test_a_cancelled_ask_is_no_answer() -> None:
    assert await _ask(Editor(answer=None)) is None


async def test_own_options_and_an_answer_never_offered() -> None:
    always = PermissionOption(option_id="allow-always", name="Always allow", kind="allow_always")
    assert await _ask(Editor(answer="allow-always"), options=[always]) == "allow-always"
    with pytest.raises(PermissionAnswerError) as raised:
        await _ask(Editor(answer="allow-forever"))
    assert raised.value.code == "ACP_PERMISSION_ANSWER_INVALID" and "allow-forever" in raised.value.message
