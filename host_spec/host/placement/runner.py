"""The worker's side of placement: hold members' leases and run their posted calls.

A worker announces itself with a presence lease (``worker:<holder>``), so Lead
processes start posting their members' work (:mod:`.lead`); the lease also says
how many members it holds and may hold, rewritten whenever that changes (after
members are let go, and after claims and before their calls are taken), so a
Lead runs a call itself at once when no worker has room. It then claims the
lease of each *wanted* member -- one with posted calls and no live holder -- up
to ``max_members`` at a time, recovers what a dead previous holder left taken
(:meth:`~host_spec.host.store.postgres.work.WorkDesk.recover`), takes the
member's calls in posting order and runs each one: a model call through the
run's own model (the profile and model spec the Lead recorded in the store), a
workspace tool call through the profile's workspace tools over this worker's
checkout (``--workspace``, else the one the member's session records; a
``worktree``-mode member gets its own worktree of that checkout, :mod:`.checkouts`),
an MCP tool call through the profile's MCP servers, which this worker runs against that
checkout. A member
stays with its worker while it keeps getting work (its checkout is here) and is
let go after ``linger_seconds`` without any.

Every answer is written under the member's lease epoch, so a worker that lost
the lease (it froze past its expiry and another worker took over) has its
answers refused; it drops the member and goes on. A call the Lead withdrew
(the member was interrupted) has its signal aborted here.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec
import structlog

from host_spec import hookimpl
from host_spec.errors import DshError, SessionLockedError
from host_spec.lifetime import AbortSignal
from host_spec.records import ToolSpec
from host_spec.workspace import WriteAuditor

from host_spec.host.agents.tools import error_result
from host_spec.host.models.adapter import ModelRequest
from host_spec.host.store.postgres.link import Link
from host_spec.host.store.postgres.notify import Listener
from host_spec.host.store.postgres.work import WORK_CHANNEL, Taken, WorkDesk, member_key, worker_key
from host_spec.host.placement.checkouts import DEFAULT_LEAD_REPO, WorkerCheckouts
from host_spec.host.placement.stand_in import Audits, StandIn, StandInSession, collecting, judging
from host_spec.host.placement.wire import (
    WORKTREE_OP, Failure, ModelAnswer, ModelWork, ToolAnswer, ToolWork, decode_model_work, decode_tool_work, encode,
)

__all__ = ["MemberRunner"]

log = structlog.get_logger(__name__)

#: Seconds a member without work stays with its worker before its lease is let go.
LINGER_SECONDS: Final = 5.0
_ROUND_SECONDS: Final = 0.5
#: How many more wanted members than it has room for a worker looks at (see ``_round``).
_SPREAD: Final = 4


@attrs.define(eq=False)
class _Held:
    epoch: int
    idle_since: float
    root: str | None = None  # the Team whose calls it ran (its host is closed once no held member needs it)
    #: The Team epoch of the calls it runs: the member's cached state (``session``, the host's
    #: model) belongs to it, and is dropped and read again from the store when a call of a
    #: newer Team epoch comes (the Team changed holder).
    team_epoch: int = 0
    session: StandInSession | None = None
    running: dict[str, tuple[asyncio.Task[None], AbortSignal]] = attrs.Factory(dict)


class _AuditsPlugin:
    """Publishes :class:`Audits` as the worker host's write auditor."""

    @hookimpl
    def dsh_plugin_loaded(self, host: Any, ctx: Any) -> None:
        ctx.provide(WriteAuditor, Audits())


async def _no_body(args: Any, call: Any) -> Any:  # pragma: no cover - a stand-in tool is offered, never run here
    raise RuntimeError("a stand-in tool only describes a tool to the model")


class MemberRunner:
    """Runs members' posted calls (see the module docstring).

    Args:
        store: This worker's PostgreSQL store handle.
        max_members: Members held at once.
        workspace: This worker's checkout, or ``None`` to use each member's recorded one.
        open_host: ``await open_host(root)``: a host with the run's model and workspace tools.
        linger_seconds: How long a member without work stays held.
        say: Prints one progress line.
        checkouts: Members' places in ``workspace`` (default: worktrees reached from ``origin``).
    """

    def __init__(self, store: Any, *, max_members: int, workspace: Path | None, open_host: Any,
                 linger_seconds: float = LINGER_SECONDS, say: Any = None,
                 checkouts: WorkerCheckouts | None = None) -> None:
        self.store = store
        self._control = Link(store.url, retry_seconds=store.link.retry_seconds)
        self.desk = WorkDesk(store, self._control)  # taking and claiming; answers go over the store's link
        self.answers = WorkDesk(store)
        self.max_members = max_members
        self.workspace = workspace
        self.checkouts = checkouts or WorkerCheckouts(
            None if workspace is None else str(workspace), DEFAULT_LEAD_REPO)
        self.linger_seconds = linger_seconds
        self._open_host = open_host
        self._say = say or (lambda text: None)
        self.held: dict[str, _Held] = {}
        self._hosts: dict[tuple[str, int], Any] = {}  # by Team root and Team epoch
        self._wake = asyncio.Event()
        self._stop_listening = threading.Event()
        self._published: int | None = None  # the member count the presence lease says (None: not said yet)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then let the running calls finish and release every lease."""
        presence = worker_key(self.store.holder)
        await asyncio.to_thread(self.store.leases.acquire, presence, presence)
        await self._publish()  # its room, before any Lead counts on it
        loop = asyncio.get_running_loop()
        listener = threading.Thread(target=self._listen, args=(loop,), name="dsh-worker-desk", daemon=True)
        listener.start()
        try:
            while not stop.is_set():
                self._wake.clear()  # before the round: a post during it wakes the next one at once
                await self._round()
                waits = [asyncio.ensure_future(self._wake.wait()), asyncio.ensure_future(stop.wait())]
                await asyncio.wait(waits, timeout=_ROUND_SECONDS, return_when=asyncio.FIRST_COMPLETED)
                for waiting in waits:
                    waiting.cancel()
        finally:
            self._stop_listening.set()
            self.store.leases.release(presence)  # first: Leads stop handing this worker new calls
            running = [task for held in self.held.values() for task, _ in held.running.values()]
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            for member in list(self.held):
                self._let_go(member)
            self._control.close()
            for host in self._hosts.values():
                await host.close()

    def _listen(self, loop: asyncio.AbstractEventLoop) -> None:
        listener = Listener(self.store.url, WORK_CHANNEL)
        try:
            while not self._stop_listening.is_set():
                wakeup = listener.poll(_ROUND_SECONDS)
                if wakeup.tails or wakeup.resync:
                    loop.call_soon_threadsafe(self._wake.set)
        finally:
            listener.close()

    async def _round(self) -> None:
        now = time.monotonic()
        for member, held in list(self.held.items()):
            if member_key(member) in self.store.leases.lost:
                self._say(f"lost the lease of member {member}; another holder runs it now")
                for _, signal in held.running.values():
                    signal.abort("fenced")
                self._let_go(member)  # uncounted, so a later claim is a new one
        busy = {member: held.epoch for member, held in self.held.items() if held.running}
        await self._take()  # first: a posted call waits for nothing else this round does
        if busy:  # a call the Lead withdrew (its member was interrupted) is aborted here
            mine = await asyncio.to_thread(self.desk.still_mine, busy)
            for member in busy:
                for key, (_, signal) in self.held[member].running.items():
                    if key not in mine and not signal.aborted:
                        signal.abort("withdrawn")
        for member, held in list(self.held.items()):
            if not held.running and now - held.idle_since >= self.linger_seconds:
                self._let_go(member)
        needed = {(held.root, held.team_epoch) for held in self.held.values()}
        for team in [team for team in self._hosts if team not in needed]:
            await self._hosts.pop(team).close()  # no member of that Team (under that epoch) is held here any more
        await self._publish()  # members let go: Leads may post to this worker again
        room = self.max_members - len(self.held)
        if room > 0:
            # Several workers wake on the same post: each tries the wanted members in an
            # order of its own, so they spread over the workers instead of all racing
            # for the oldest few (a lost race costs a round trip and a round).
            wanted = await asyncio.to_thread(self.desk.wanted, room * _SPREAD)
            random.shuffle(wanted)
            claimed = 0
            for member in wanted:
                if claimed < room and await self._claim(member):
                    claimed += 1
            if claimed:
                await self._publish()  # before taking: a Lead whose call cannot come here runs it at once
                await self._take()

    async def _publish(self) -> None:
        """Say on the presence lease how many members this worker holds and may hold, when that changed."""
        held = len(self.held)
        if held != self._published:
            await asyncio.to_thread(self.desk.present, held, self.max_members)
            self._published = held

    async def _claim(self, member: str) -> bool:
        if member in self.held:
            return False  # wanted again: its lease was fenced (a takeover); the next round lets it go
        lease = member_key(member)
        try:
            epoch = await asyncio.to_thread(self.store.leases.acquire, lease, member)
        except SessionLockedError:
            return False  # another worker claimed it first
        await asyncio.to_thread(self.desk.recover, member, epoch)
        self.held[member] = _Held(epoch, time.monotonic())
        self._say(f"running member {member} (lease epoch {epoch})")
        return True

    def _let_go(self, member: str) -> None:
        self.held.pop(member, None)
        self.store.leases.release(member_key(member))

    async def _take(self) -> None:
        """Take every queued call of every held member (one statement) and start running each."""
        epochs = {member: held.epoch for member, held in self.held.items()}
        for taken in await asyncio.to_thread(self.desk.take, epochs):
            held = self.held[taken.member]  # taken under the epochs of the members held now
            if taken.team_epoch < held.team_epoch:
                continue  # posted by a holder the Team moved on from: closed by the new one, never run
            if taken.team_epoch > held.team_epoch:
                held.team_epoch = taken.team_epoch  # the Team changed holder: rebuild the member from the store
                held.session = None
            signal = AbortSignal()
            task = asyncio.create_task(self._execute(taken.member, held, taken, signal))
            held.running[taken.key] = (task, signal)
            held.idle_since = time.monotonic()

    async def _execute(self, member: str, held: _Held, taken: Taken, signal: AbortSignal) -> None:
        held.root = taken.root
        try:
            try:
                answer = await self._answer(member, held, taken, signal)
            except Exception as exc:  # the call never ran (no host for its run, the store unreadable): say so
                log.exception("worker.call_failed", member=member, key=taken.key)
                answer = _failed(taken, f"worker {self.store.holder} could not run this call: {type(exc).__name__}: {exc}")
            stored = await asyncio.to_thread(self.answers.finish, taken.key, held.epoch, encode(answer))
            if not stored and not signal.aborted:
                log.warning("worker.answer_refused", member=member, key=taken.key, epoch=held.epoch)
        except Exception:  # the answer could not be written: the lease expires and the call is recovered
            log.exception("worker.answer_failed", member=member, key=taken.key)
        finally:
            held.running.pop(taken.key, None)
            held.idle_since = time.monotonic()

    async def _answer(self, member: str, held: _Held, taken: Taken, signal: AbortSignal) -> Any:
        host = await self._host(taken.root, taken.team_epoch)
        if taken.kind == "model":
            return await self._model(host, held, member, decode_model_work(taken.request), signal)
        return await self._tool(host, held, member, decode_tool_work(taken.request), signal)

    async def _host(self, root: str, team_epoch: int) -> Any:
        host = self._hosts.get((root, team_epoch))
        if host is None:
            host = self._hosts[(root, team_epoch)] = await self._open_host(root)
        return host

    async def _stand_in(self, host: Any, held: _Held, member: str, asker: Any, seq: int) -> StandIn:
        """The member's log read up to ``seq`` (incrementally), as the agent the call is made for."""
        if held.session is None:
            header = await asyncio.to_thread(self.store.header, member)
            if self.workspace is not None:
                here = await asyncio.to_thread(self.checkouts.cwd_for, header.cwd)  # a worktree member's own
                header = msgspec.structs.replace(header, cwd=here)
            held.session = StandInSession(header)
        session = held.session
        if len(session.stored) < seq:
            _, events = await asyncio.to_thread(self.store.read_since, member, len(session.stored))
            # Calls of one member run side by side: another may have read the same rows meanwhile.
            # ``stored[i]`` is the event of seq ``i + 1``, so only the events past it are added.
            known = len(session.stored)
            session.stored.extend(event for event in events if event.seq > known)
        for event in session.stored[session.cut:seq]:
            host.committed(session, event)  # the workspace tools' read ledger follows the log
        session.cut = max(session.cut, seq)
        return StandIn(asker.id, asker.name, asker.model, session, asker.role)

    async def _model(self, host: Any, held: _Held, member: str, work: ModelWork, signal: AbortSignal) -> ModelAnswer:
        agent: Any = await self._stand_in(host, held, member, work.asker, work.seq)
        tools = [ToolSpec(name=t.name, description=t.description, args_type=dict, result_type=Any, execute=_no_body,
                          input_schema=t.parameters) for t in work.tools]
        request = ModelRequest(agent=agent, system=work.system, messages=work.messages, tools=tools, signal=signal,
                               purpose=work.purpose)
        try:
            return ModelAnswer(reply=dict(await host.models.complete(request)))
        except DshError as exc:
            return ModelAnswer(failure=Failure(exc.code, exc.message))

    async def _tool(self, host: Any, held: _Held, member: str, work: ToolWork, signal: AbortSignal) -> ToolAnswer:
        if work.name == WORKTREE_OP:  # a completion's step, asked by the Lead (never offered to a model)
            return ToolAnswer(result=await self.checkouts.answer(host, work.arguments, signal))
        agent = await self._stand_in(host, held, member, work.asker, work.seq)
        collected = collecting()
        judging(work.audits)
        host.created(agent)  # what the worker's plugins give an agent: the MCP servers' tools, running here
        try:
            result = await host.tools.execute(agent, work.call_id, work.name, work.arguments, signal,
                                              turn=work.turn, step=work.step)
        finally:
            host.disposed(agent)
        return ToolAnswer(result=msgspec.to_builtins(result), appends=collected)


def _failed(taken: Taken, text: str) -> Any:
    """The answer to a call this worker could not run: a model failure, or a tool call that did not start."""
    if taken.kind == "model":
        return ModelAnswer(failure=Failure("MODEL_ERROR", text))
    try:
        work = decode_tool_work(taken.request)
    except msgspec.DecodeError:
        return ToolAnswer(lost="TOOL_NOT_STARTED")
    result = error_result(work.call_id, work.name, "TOOL_NOT_STARTED", text, turn=work.turn, step=work.step)
    return ToolAnswer(result=msgspec.to_builtins(result))


def audits_plugin() -> object:
    """The plugin a worker host loads so writes are audited with the Lead's verdicts."""
    return _AuditsPlugin()
