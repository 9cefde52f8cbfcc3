"""The observer plugin of one editor session: committed events become ``session/update`` notifications.

:class:`RunFeed` is loaded into the session's host before the profile's plugins
(so it sees every event, in commit order, and unloads last). Hooks are
synchronous and must not block, so it only queues: :class:`UpdateSender` sends the
updates in order on one task, and asks the progress contributors for the plan
there, after the Team's own fold of the event has run. A prompt's answer waits
for the sender to drain, so every update of a turn reaches the editor before the
turn's ``stopReason``.

While a stored run is replayed (``session/load``) the feed is not ``live``: what
the log already holds is sent by the replay, once; only the Lead's turn
bookkeeping is followed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final

import acp
import attrs
import structlog

from host_spec import hookimpl
from host_spec.events import Event, EventType

from host_spec.host.acp.progress import Progress
from host_spec.host.acp.turns import TurnWaits
from host_spec.host.acp.updates import ToolCalls, Update, event_updates, tool_call_id
from host_spec.host.runs import agent_name

__all__ = ["UpdateSender", "RunFeed"]

log = structlog.get_logger(__name__)
_PROGRESS: Final = object()


class UpdateSender:
    """The updates of one editor session, sent in order by one task (:meth:`run`)."""

    def __init__(self, send: Callable[[str, Update], Awaitable[None]]) -> None:
        self.send = send
        self.session_id = ""  # set once the run's root session exists
        self.progress: Progress | None = None
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._progress_queued = False

    def put(self, update: Update) -> None:
        self._queue.put_nowait(update)

    def progress_changed(self) -> None:
        """Ask for the plan again once the updates queued so far are sent (at most one ask queued)."""
        if not self._progress_queued:
            self._progress_queued = True
            self._queue.put_nowait(_PROGRESS)

    async def run(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                if isinstance(item, asyncio.Future):  # a drained() mark: everything before it was sent
                    if not item.done():
                        item.set_result(None)
                    continue
                if item is _PROGRESS:
                    self._progress_queued = False
                    item = self.progress.update() if self.progress is not None else None
                if item is not None:
                    await self.send(self.session_id, item)
            except Exception as exc:  # the editor went away: the run goes on, its log keeps everything
                log.warning("acp.update_not_sent", error=f"{type(exc).__name__}: {exc}")
            finally:
                self._queue.task_done()

    async def drained(self) -> None:
        """Wait until everything queued so far was sent (not what a busy Team queues meanwhile)."""
        mark: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(mark)
        await mark


@attrs.define(eq=False)
class RunFeed:
    """Observer plugin: every agent's committed events as updates; the Lead's turns for the prompts."""

    sender: UpdateSender
    turns: TurnWaits = attrs.Factory(TurnWaits)
    root_id: str | None = None
    live: bool = True
    names: dict[str, str] = attrs.Factory(dict)
    calls: ToolCalls = attrs.Factory(ToolCalls)

    def _name(self, session: Any) -> str:
        return self.names.get(session.id) or agent_name(session)

    @hookimpl
    def dsh_agent_created(self, agent: Any) -> None:
        self.names[agent.id] = agent.name

    @hookimpl
    def dsh_agent_session_start(self, agent: Any, source: str) -> None:
        if self.live and source == "resume" and agent.id != self.root_id:
            self.sender.put(acp.update_agent_thought_text(f"[{agent.name}] (resumed from disk)\n"))

    @hookimpl
    def dsh_agent_status(self, agent: Any, status: str) -> None:
        if agent.id == self.root_id:
            if status == "idle":
                self.turns.idle()
        elif self.live and status == "running":
            self.sender.put(acp.update_agent_thought_text(f"[{agent.name}] working\n"))

    @hookimpl
    def dsh_session_event(self, session: Any, event: Event) -> None:
        lead = session.id == self.root_id
        if lead and event.type == EventType.USER_MESSAGE:
            self.turns.claimed(event.value().get("id"))
        if not self.live:
            return
        if event.type in (EventType.TOOL_CALL, EventType.TOOL_RESULT):
            value = event.value()
            call = tool_call_id(session.id, str(value.get("call_id")))
            if event.type == EventType.TOOL_CALL:
                self.calls.recorded(session.id, str(value.get("name")), call)
            else:
                self.calls.finished(session.id, str(value.get("name")), call)
        for update in event_updates(self._name(session), session.id, event, lead=lead):
            self.sender.put(update)
        if lead:
            self.sender.progress_changed()

    @hookimpl
    def dsh_tool_pre_call(self, agent: Any, tool: str) -> None:
        if self.live:
            update = self.calls.started(agent.id, tool)
            if update is not None:
                self.sender.put(update)

    @hookimpl
    def dsh_agent_turn_end(self, agent: Any, turn: int, reason: dict[str, Any]) -> None:
        if agent.id == self.root_id:
            self.turns.turn_ended(reason)
