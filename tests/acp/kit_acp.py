"""The SDK's own client side driving ``dsh acp`` in a real subprocess over real stdio.

:class:`Editor` is an ``acp.Client`` that records every ``session/update`` and
answers ``session/request_permission`` with a chosen option. :func:`agent`
spawns ``dsh acp`` with ``acp.spawn_agent_process`` (the SDK's own launcher),
its stderr into a file (a pipe nobody reads could fill up and stall the agent).
:func:`until` waits for a condition on the updates with a bound: a safety net
against a hang, never a speed assertion.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

import acp
from acp.schema import AllowedOutcome, ClientCapabilities, DeniedOutcome, RequestPermissionResponse

from host_spec.host.demo import SCRIPT

REPO: Final = Path(__file__).resolve().parents[2]
DEMO: Final = SCRIPT
#: Bound of one wait for the agent (the machine may be loaded): a safety net, not a speed goal.
PATIENCE: Final = 45.0


class Editor:
    """An ACP client that records what the agent sends."""

    def __init__(self, answer: str | None = None) -> None:
        self.updates: list[Any] = []
        self.asks: list[Any] = []
        self.answer = answer
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self.changed.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        self.asks.append((session_id, tool_call, options))
        if self.answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.answer))

    # what this editor shows, by kind
    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def message_text(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))

    def thought_text(self) -> str:
        return "".join(u.content.text for u in self.of("agent_thought_chunk"))

    def tool_calls(self) -> dict[str, dict[str, Any]]:
        """Tool call id -> its title and the statuses it went through, in order."""
        calls: dict[str, dict[str, Any]] = {}
        for update in self.updates:
            if update.session_update == "tool_call":
                calls[update.tool_call_id] = {"title": update.title, "statuses": [update.status], "kind": update.kind,
                                              "text": ""}
            elif update.session_update == "tool_call_update":
                call = calls[update.tool_call_id]  # an update never precedes its call
                if update.status is not None:
                    call["statuses"].append(update.status)
                for content in update.content or ():
                    call["text"] += content.content.text
        return calls

    def plans(self) -> list[list[tuple[str, str]]]:
        return [[(e.content, e.status) for e in u.entries] for u in self.of("plan")]


async def until(editor: Editor, condition: Callable[[], Any], what: str, patience: float = PATIENCE) -> Any:
    """Wait until ``condition()`` is truthy (re-checked on every update); its value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while True:
        value = condition()
        if value:
            return value
        editor.changed.clear()
        remaining = deadline - loop.time()
        assert remaining > 0, f"never saw {what}; last updates: {editor.updates[-5:]}"
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(editor.changed.wait(), remaining)


def dsh_acp(data: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "host_spec.host.cli.main", "acp", "--data-dir", str(data), *flags]


@contextlib.asynccontextmanager
async def agent(editor: Editor, data: Path, *flags: str, log: Path) -> AsyncIterator[tuple[Any, Any]]:
    """``dsh acp`` in a subprocess, connected to ``editor``; yields ``(connection, process)``."""
    with log.open("ab") as stderr:
        argv = dsh_acp(data, *flags)
        async with acp.spawn_agent_process(editor, argv[0], *argv[1:], cwd=REPO,
                                           transport_kwargs={"stderr": stderr.fileno()}) as (conn, process):
            yield conn, process


async def initialized(conn: Any) -> Any:
    caps = ClientCapabilities()
    return await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=caps),
                                  PATIENCE)


async def prompt(conn: Any, session_id: str, text: str) -> Any:
    return await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=[acp.text_block(text)]), PATIENCE)
