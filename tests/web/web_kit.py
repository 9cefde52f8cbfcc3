"""A real scripted Team run with the web panel loaded, for the panel's tests.

Nothing is mocked: a reference host with JSONL persistence runs the
``agent-teams`` profile and the ``dsh-team-web`` plugin; the scripted model drives
a Lead and a builder. The builder's second step waits for the words ``finish
now`` in its conversation, so a test decides when it completes task-1 (by
steering the builder, as a user would), and the Lead answers ``mode check`` with
one more model call, so a test can see which tools that step offered.

Two ways to run it: :func:`in_portal` opens the host on the event loop of
Starlette's test client (so its requests and the Team share one loop), and
:class:`LoopThread` runs it on a loop of its own thread (for a real browser,
which is driven from the test's thread).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from dsh_team import TeamServiceAPI
from dsh_team.web.plugin import Panel
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.testing import FaultyStorage
from host_spec.messages import user_message

T = TypeVar("T")

TOKEN = "test-token-0123456789"
PROMPT = "Run a small Team: a builder writes module a, then module b."

SCRIPT: dict[str, Any] = {
    "lead": [
        {"text": "Two tasks; b needs a.", "tool_calls": [
            {"name": "team_task_create", "arguments": {
                "subject": "Write module a", "description": "Create src/a.py.", "write_scopes": ["src/a.py"]}},
            {"name": "team_task_create", "arguments": {
                "subject": "Write module b", "description": "Create src/b.py using a.",
                "blocked_by": ["task-1"], "write_scopes": ["src/b.py"]}},
        ]},
        {"text": "A builder takes task-1.", "tool_calls": [
            {"name": "spawn_teammate", "arguments": {
                "name": "builder", "description": "Writes the modules", "context": "fresh",
                "prompt": "Claim task-1, write src/a.py, complete it when told."}},
        ]},
        {"when": "mode check", "text": "Checking which tools I have."},
    ],
    "builder": [
        {"text": "Claiming task-1.", "tool_calls": [
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 1, "action": "claim"}},
        ]},
        {"when": "finish now", "text": "Writing src/a.py, then completing task-1.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "src/a.py", "content": "A = 1\n"}},
            {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 2, "action": "complete"}},
        ]},
    ],
}

#: ``(input, output)`` tokens every model call of the kit reports (so the roster has usage to show).
USAGE = (120, 30)

TEAM_TOOLS = frozenset({"team_task_create", "team_task_update", "team_task_list", "team_task_get"})


class GatedModel:
    """The scripted model, reporting :data:`USAGE` per call; a held member's next model call waits until released.

    Only the model (the outside world of a host) is held: the member's turn really
    runs, so its agent stays loaded and ``running`` while a test looks at it.
    """

    def __init__(self, script: dict[str, Any]) -> None:
        self.scripted = ScriptedModel.from_mapping(script)
        self.requests = self.scripted.requests
        self._held: dict[str, asyncio.Event] = {}
        self.waiting: dict[str, asyncio.Event] = {}

    def hold(self, name: str) -> None:
        self._held[name] = asyncio.Event()
        self.waiting[name] = asyncio.Event()

    def release(self, name: str) -> None:
        self._held.pop(name).set()

    async def complete(self, request: Any) -> Any:
        gate = self._held.get(request.agent.name)
        if gate is not None:
            self.waiting[request.agent.name].set()
            await gate.wait()
        reply = await self.scripted.complete(request)
        return {**reply, "usage": {"input_tokens": USAGE[0], "output_tokens": USAGE[1]}, "model": "scripted:kit"}


class Team:
    """The opened run: host, model, panel, Lead."""

    def __init__(self, host: Host, model: GatedModel, lead: Any) -> None:
        self.host = host
        self.model = model
        self.lead = lead
        self.panel: Any = host.service(Panel)
        self.service: Any = host.service(TeamServiceAPI)

    def agent_id(self, name: str) -> str:
        """A member's session id (from the service's roster)."""
        return next(row.id for row in self.service.list_members(self.lead) if row.name == name)

    def agent(self, name: str) -> Any:
        return next(agent for agent in self.host.agents.list() if agent.name == name)

    async def tell(self, name: str, text: str) -> None:
        """Tell a member something and wait until the team is quiet again.

        The Lead gets a user's steer; a teammate gets a Team message from the Lead
        (which resumes it if it was released while idle).
        """
        if name == "lead":
            self.lead.steer(user_message(text))
        else:
            await self.service.send_message(self.lead, target=name, content=[{"type": "text", "text": text}])
        await self.host.quiesce()

    async def hold_running(self, name: str, text: str) -> asyncio.Task[None]:
        """Start ``name``'s next turn with ``text`` and keep it running (its model call held)."""
        self.model.hold(name)
        told = asyncio.ensure_future(self.tell(name, text))
        await self.model.waiting[name].wait()
        return told

    async def let_go(self, name: str, told: asyncio.Task[None]) -> None:
        self.model.release(name)
        await told

    def tools_of_last_step(self, name: str) -> set[str]:
        return set(next(r for r in reversed(self.model.requests) if r.agent_name == name).tools)


async def open_team(path: Path, *, script: dict[str, Any] | None = None, token: str = TOKEN) -> Team:
    """Open the host, load the panel, run the Lead's prompt until the team is quiet.

    The Team's workspace is ``<path>-workspace`` (its file tools write there).
    """
    model = GatedModel(script or SCRIPT)
    host = await Host.open(path, "agent-teams", model, wrap_storage=FaultyStorage)  # faults stay off until armed
    host.plugins.load("dsh-team-web", {"token": token})
    workspace = path.with_name(path.name + "-workspace")
    workspace.mkdir(parents=True, exist_ok=True)
    lead = await host.run(PROMPT, cwd=str(workspace))
    return Team(host, model, lead)


class Dispatch:
    """An ASGI app that forwards to the panel's app once the host (on the test client's loop) made it."""

    def __init__(self) -> None:
        self.app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await self.app(scope, receive, send)


class LoopThread:
    """An event loop on its own thread; :meth:`call` runs a coroutine there and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="host-loop", daemon=True)
        self._thread.start()

    def call(self, work: Awaitable[T] | Callable[[], Awaitable[T]], timeout: float = 60.0) -> T:
        coro = work() if callable(work) else work
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def soon(self, fn: Callable[[], Any]) -> None:
        self.loop.call_soon_threadsafe(fn)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()
