"""The Lead's side of placement: a member's model and workspace tool calls go to a worker when one is alive.

On a shared store the Lead's process keeps writing every log of its Team, so
mail, the board, waits, interrupts and quiescence behave exactly as in one
process. What it hands out is the work of a member's step: the model call, and
each workspace and MCP tool call (the file, search and shell tools act on a
worker's checkout, and the worker runs the profile's MCP servers against it). Both are posted to the store's work desk
(:mod:`host_spec.host.store.postgres.work`) after the member's log is durable up
to that point (the turn loop's checkpoint), and the answer is recorded in the
member's log here, as if the call had run here.

Where a call runs:

* the Lead itself, and every agent when no worker holds a live presence lease,
  runs here, as it always did;
* otherwise the call is posted if a worker can take it -- a live worker holds the
  member, or has room for one more (its presence says how many members it holds
  and may hold) -- and a worker holding the member's lease takes it;
* a call no live worker can take (every worker full) is not posted: it runs here at
  once, and the process says so once (``placement.workers_full``) and counts it
  (:attr:`Placement.ran_here`);
* a posted call that no worker can take any more (the last slot went to another
  member meanwhile) is withdrawn at the next look and run here, and one nobody took
  within ``grace_seconds`` (a worker that froze) likewise, so one process still
  runs the whole Team;
* a call taken by a holder whose lease expired (the worker died) is recovered by
  the next claim of the member's lease -- a worker's, or this process's own when
  no worker claims it: a model call is asked again, a tool call is answered
  ``TOOL_OUTCOME_UNKNOWN`` (it may have run; a tool never runs twice);
* a call posted under a Team epoch that moved on (another process took the Team
  over: the desk refuses the post, or the new holder closed the row) is neither
  run here nor answered: the wait raises ``SESSION_FENCED``, as this process's
  next append would.

An interrupt of the member (its turn's signal) withdraws the call; the worker
stops running it.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any, Final

import msgspec
import structlog

from host_spec.errors import DshError, ModelError, SessionFencedError, SessionLockedError
from host_spec.messages import ToolResultMessage
from host_spec.workspace import CommandRunner, WriteAuditor

from host_spec.host.agents.loop import race
from host_spec.host.agents.tools import error_result
from host_spec.host.models.adapter import tool_schema
from host_spec.host.workspace.paths import Workspace
from host_spec.host.store.postgres.notify import Listener
from host_spec.host.store.postgres.work import WORK_CHANNEL, WorkDesk, member_key
from host_spec.host.placement.commands import PlacedCommands
from host_spec.host.placement.wire import (
    Asker, ModelWork, ToolAnswer, ToolDef, ToolWork, decode_model_answer, decode_tool_answer, encode,
)

__all__ = ["Placement", "PlacedModel", "PLACED_TOOLS"]

log = structlog.get_logger(__name__)

#: The tools whose calls run where the member's work runs (they act on a checkout).
PLACED_TOOLS: Final = frozenset({"read_file", "write_file", "edit_file", "glob", "list_dir", "grep", "bash"})
#: The prefix of MCP tools (``mcp__SERVER__TOOL``): placed too, the worker runs the profile's servers on its checkout.
MCP_PREFIX: Final = "mcp__"
#: Seconds a posted call may wait for a worker before this process runs it itself.
GRACE_SECONDS: Final = 3.0
#: Seconds between two looks at a posted call when no notification came (the safety net).
RECHECK_SECONDS: Final = 0.5
#: Seconds a count of live workers is trusted before it is asked again.
WORKERS_TTL: Final = 1.0
#: Settled rows between two prunes of a Team's desk history (:meth:`WorkDesk.prune`).
PRUNE_EVERY: Final = 64
_WRITES: Final = frozenset({"write_file", "edit_file"})


class Placement:
    """Posts members' work to the store's desk and waits for the answers (see the module docstring).

    Args:
        host: The Lead's host (its services: the Team's write auditor).
        store: The host's PostgreSQL store (its desk, leases and URL).
        grace_seconds: How long a posted call waits for a worker before it runs here.
    """

    def __init__(self, host: Any, store: Any, *, grace_seconds: float = GRACE_SECONDS) -> None:
        self.host = host
        self.store = store
        self.desk = WorkDesk(self.store)
        self.grace_seconds = grace_seconds
        self._workers = (-WORKERS_TTL, 0)  # (when counted, how many)
        self._settles = 0
        #: Calls run here because no live worker had room, by kind (``model`` | ``tool``).
        self.ran_here: dict[str, int] = {"model": 0, "tool": 0}
        self._told_full = False
        self._waiting: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ deciding

    async def placed(self, agent: Any) -> bool:
        """Whether ``agent``'s calls go to a worker now (a member, and a worker is alive)."""
        if agent is None or agent.session.header.parent_session is None:
            return False
        counted, count = self._workers
        now = time.monotonic()
        if now - counted >= WORKERS_TTL:
            count = await asyncio.to_thread(self.desk.live_workers)
            self._workers = (now, count)
        return count > 0

    def _asker(self, agent: Any) -> Asker:
        return Asker(id=agent.id, name=agent.name, model=agent.model, role=agent.role)

    def _root(self, agent: Any) -> str:
        header = agent.session.header
        return str(self.store.lease_key(header.id, header.parent_session))

    # ------------------------------------------------------------ model calls

    async def complete(self, request: Any) -> Mapping[str, Any] | None:
        """The reply to ``request`` from a worker, or ``None`` when it must run here."""
        agent = request.agent
        if not await self.placed(agent):
            return None
        tools = [ToolDef(t.name, t.description, dict(tool_schema(t))) for t in request.tools]
        work = ModelWork(asker=self._asker(agent), seq=agent.session.durable_seq, system=request.system,
                         messages=[dict(m) for m in request.messages], tools=tools, purpose=request.purpose)
        answer = await self._run(agent, "model", encode(work))
        if answer is None:
            return None
        reply = decode_model_answer(answer)
        if reply.failure is not None:
            raise ModelError(reply.failure.message, code=reply.failure.code)
        return reply.reply or {}

    # ------------------------------------------------------------ tool calls

    async def run_tool(self, agent: Any, name: str, call_id: str, arguments: bytes, signal: Any, *,
                       turn: int, step: int) -> ToolResultMessage | None:
        """The result of a workspace tool call run by a worker, or ``None`` when it must run here.

        The events the tool recorded on the worker (what it read, what it wrote)
        are appended to the member's log here, before the result, as a local call's
        would be.
        """
        if (name not in PLACED_TOOLS and not name.startswith(MCP_PREFIX)) or not await self.placed(agent):
            return None
        work = ToolWork(asker=self._asker(agent), seq=agent.session.durable_seq, call_id=call_id, name=name,
                        arguments=arguments.decode(), turn=turn, step=step, audits=self._audits(agent, name, arguments))
        finished, answer = await race(self._run(agent, "tool", encode(work)), signal)
        if not finished:  # interrupted: the call was withdrawn and the worker aborts it
            return error_result(call_id, name, "ABORTED", "tool call aborted", turn=turn, step=step)
        if answer is None:
            return None
        decoded = decode_tool_answer(answer)
        if decoded.lost is not None or decoded.result is None:
            code = decoded.lost or "TOOL_OUTCOME_UNKNOWN"
            text = ("the worker could not read this call; it did not run" if code == "TOOL_NOT_STARTED" else
                    "the worker running this call stopped before it answered; the call may or may not have run")
            return error_result(call_id, name, code, text, turn=turn, step=step)
        for type_, data in decoded.appends:
            agent.session.append(type_, data)
        return msgspec.convert(decoded.result, ToolResultMessage)

    def commands(self, local: CommandRunner) -> CommandRunner:
        """``local`` with a placed member's checks run on its worker, in its worktree there (:mod:`.commands`)."""
        return PlacedCommands(self, local)

    async def run_step(self, agent: Any, name: str, arguments: str) -> ToolAnswer | None:
        """A host step in ``agent``'s checkout (not a model's tool call) run by its worker; ``None``: run it here.

        Posted and recovered like a tool call: a worker that dies while running it
        answers ``TOOL_OUTCOME_UNKNOWN`` (``lost``), never a second run.
        """
        if not await self.placed(agent):
            return None
        work = ToolWork(asker=self._asker(agent), seq=agent.session.durable_seq, call_id=f"step-{uuid.uuid4().hex}",
                        name=name, arguments=arguments, turn=0, step=0)
        answer = await self._run(agent, "tool", encode(work))
        return None if answer is None else decode_tool_answer(answer)

    def _audits(self, agent: Any, name: str, arguments: bytes) -> dict[str, Any] | None:
        """The Team's write-scope verdict for the path a write names, judged here where the board is."""
        auditor = self.host.find_service(WriteAuditor) if name in _WRITES else None
        cwd = agent.session.header.cwd
        if auditor is None or cwd is None:
            return None
        try:
            path = msgspec.json.decode(arguments)["path"]
            workspace = Workspace.at(cwd)
            rel = workspace.relative(workspace.resolve(path))
        except (DshError, msgspec.DecodeError, KeyError, TypeError, OSError):
            return None  # the tool refuses the call itself, with its own error
        verdict = auditor.audit_write(agent, rel)
        return {rel: None if verdict is None else msgspec.to_builtins(verdict)}

    # ------------------------------------------------------------ posting and waiting

    async def _run(self, agent: Any, kind: str, request: bytes) -> bytes | None:
        """Post one call and wait for its answer; ``None``: withdrawn unanswered, run it here."""
        member, key = agent.id, f"{agent.id}:{uuid.uuid4().hex}"
        if not await asyncio.to_thread(self.desk.post, key, self._root(agent), member, kind, request):
            self._run_here(member, kind, "workers_full")
            return None
        self._ensure_listening()
        woken = asyncio.Event()
        entry = (asyncio.get_running_loop(), woken)
        with self._lock:
            self._waiting.setdefault(member, []).append(entry)
        posted = time.monotonic()
        try:
            while True:
                woken.clear()
                outcome = await asyncio.to_thread(self.desk.outcome, key)
                if outcome is None or not outcome.team_held or outcome.state in ("withdrawn", "settled"):
                    # Only this waiter withdraws a row it waits for (below), and only the holder that
                    # took the Team over closes one: this process lost its Team, so no answer of this
                    # call is accepted here and the call does not run here either.
                    raise self._fenced(agent, key)
                if outcome.state == "done":
                    await asyncio.to_thread(self.desk.settle, key)
                    self._settled(agent)
                    return outcome.result
                waited = time.monotonic() - posted >= self.grace_seconds
                if outcome.state == "queued" and (waited or not outcome.placeable):
                    if await asyncio.to_thread(self.desk.withdraw, key, taken_too=False):
                        self._run_here(member, kind, "not_taken" if outcome.placeable else "workers_full")
                        return None
                if outcome.state == "taken" and not outcome.holder_live:
                    await asyncio.to_thread(self._recover, member)
                try:
                    await asyncio.wait_for(woken.wait(), timeout=RECHECK_SECONDS)
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            # The turn was interrupted: take the call back so the worker stops running it.
            threading.Thread(target=self._withdraw_quietly, args=(key,), daemon=True).start()
            raise
        finally:
            with self._lock:
                waiters = self._waiting.get(member, [])
                if entry in waiters:
                    waiters.remove(entry)
                if not waiters:
                    self._waiting.pop(member, None)

    def _run_here(self, member: str, kind: str, why: str) -> None:
        """Count and tell a call that runs in this process instead of on a worker.

        ``workers_full``: every live worker was full (the operator's cue to add
        workers or raise ``--max-members``), told once per process as a warning
        and then at info level per call; ``not_taken``: posted, but no worker took
        it within the grace.
        """
        if why == "workers_full":
            self.ran_here[kind] += 1
            if not self._told_full:
                self._told_full = True
                log.warning("placement.workers_full", member=member, kind=kind,
                            detail="every live worker is full: members' calls run in this process until one has room")
        log.info("placement.run_here", member=member, kind=kind, reason=why)

    def _fenced(self, agent: Any, key: str) -> SessionFencedError:
        root = self._root(agent)
        return SessionFencedError(
            f"member {agent.id}: the Team {root} was taken over by another holder while call {key} waited; "
            "its answer is not accepted here and the call does not run here", session=agent.id, root=root)

    def _settled(self, agent: Any) -> None:
        """Count a settled row; every :data:`PRUNE_EVERY` of them, prune the Team's desk history."""
        self._settles += 1
        if self._settles % PRUNE_EVERY == 0:
            threading.Thread(target=self._prune_quietly, args=(self._root(agent),), daemon=True).start()

    def _prune_quietly(self, root: str) -> None:
        try:
            self.desk.prune(root)
        except Exception as exc:  # the next prune catches up: the history is bounded, not exact
            log.warning("placement.prune_failed", root=root, error=type(exc).__name__)

    def _withdraw_quietly(self, key: str) -> None:
        try:
            self.desk.withdraw(key, taken_too=True)
        except Exception as exc:  # the worker's answer is then ignored: nobody waits for it
            log.warning("placement.withdraw_failed", key=key, error=type(exc).__name__)

    def _recover(self, member: str) -> None:
        """The member's holder died: claim its lease briefly so its taken calls are recovered."""
        lease = member_key(member)
        try:
            epoch = self.store.leases.acquire(lease, member)
        except SessionLockedError:
            return  # a live holder (a worker that claimed it meanwhile) recovers them
        try:
            self.desk.recover(member, epoch)
        finally:
            self.store.leases.release(lease)

    def _ensure_listening(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._listen, name="dsh-placement", daemon=True)
            self._thread.start()

    def _listen(self) -> None:
        listener = Listener(self.store.url, WORK_CHANNEL)
        try:
            while not self._stop.is_set():
                wakeup = listener.poll(RECHECK_SECONDS)
                with self._lock:
                    members = list(self._waiting) if wakeup.resync else [m for m in wakeup.tails if m in self._waiting]
                    entries = [entry for m in members for entry in self._waiting.get(m, [])]
                for loop, woken in entries:
                    loop.call_soon_threadsafe(woken.set)
        finally:
            listener.close()

    def close(self) -> None:
        """Stop listening (calls still posted are withdrawn by their waiters)."""
        self._stop.set()


class PlacedModel:
    """The turn loop's model: a member's call goes through :class:`Placement`, the rest to ``routes``.

    Everything but :meth:`complete` (context windows, member models, closing) is the routes'.
    """

    def __init__(self, routes: Any, placement: Placement) -> None:
        self.routes = routes
        self.placement = placement

    def __getattr__(self, name: str) -> Any:
        return getattr(self.routes, name)

    async def complete(self, request: Any) -> Mapping[str, Any]:
        reply = await self.placement.complete(request)
        if reply is None:
            return await self.routes.complete(request)
        return reply
