"""Residency of continuable children: activations, settlement, child-first release, quiescence.

Why a watcher per activation and not a status hook: settlement needs three facts
at once (the agent is idle, it owns no resident children, nothing it accepted is
still unclaimed), and two of them change without a status change. The watcher
waits for idleness or a *poke* (a delivery, a child's release, a status change
forwarded by the app) and re-checks under the child's lock, so a delivery that
raced with settlement either lands before the check (the child is busy again) or
after the release (and cold-resumes it).

Release order is child-first: the parent's turn is cancelled first (so nothing new
starts), its resident children are released concurrently and awaited, then the
parent quiesces, gets a best-effort final flush and is disposed.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import structlog

from host_spec.errors import DshError, SubagentError
from host_spec.messages import user_message
from host_spec.records import CancelCause

from host_spec.host.children.activation import Activation, epoch_outcome, settlement_notice
from host_spec.host.store.context import current_cause

if TYPE_CHECKING:
    from host_spec.host.agents.agent import Agent as LiveAgent
    from host_spec.protocols import Agent

__all__ = ["Residency", "aggregate", "log_release_failure"]

log = structlog.get_logger(__name__)


def aggregate(results: Sequence[Any], what: str) -> None:
    """Raise one ``ACTIVATION_TEARDOWN_FAILED`` for the failures among ``results``."""
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        detail = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
        raise SubagentError(f"{what} failed: {detail}", code="ACTIVATION_TEARDOWN_FAILED") from errors[0]


def _clean_context() -> contextvars.Context:
    """A context without the caller's tool-call cause, for the manager's own tasks."""
    context = contextvars.copy_context()
    context.run(current_cause.set, None)
    return context


def log_release_failure(task: asyncio.Future[None]) -> None:
    """Done-callback of a background release: its failure is logged, since nobody awaits it.

    A coded failure (a store or fencing error) is told on one line with its code;
    only a bug keeps its traceback.
    """
    failure = None if task.cancelled() else task.exception()
    if isinstance(failure, DshError):
        log.error("subagent.release_failed", code=failure.code, error=failure.message)
    elif failure is not None:
        log.error("subagent.release_failed", exc_info=failure)


class Residency:
    """The activation table and everything that releases entries from it."""

    def __init__(self, host: Any, *, settlement_notices: bool = True) -> None:
        self._host = host
        self.settlement_notices = settlement_notices
        self._activations: dict[str, Activation] = {}
        self._owned: dict[str, set[str]] = {}  # parent id -> resident child ids
        self._locks: dict[str, asyncio.Lock] = {}
        self._closing: set[str] = set()  # agents being released: admission is closed below them
        self._closed = False
        self._busy = 0  # starts, deliveries and releases in flight
        self._change: asyncio.Event | None = None

    # ------------------------------------------------------------ checks

    def _lock(self, child_id: str) -> asyncio.Lock:
        lock = self._locks.get(child_id)
        if lock is None:
            lock = self._locks[child_id] = asyncio.Lock()
        return lock

    def _check_live(self, agent: Agent | None, *, code: str) -> None:
        if agent is None or self._host.agents.get(agent.id) is not agent or getattr(agent, "disposing", False):
            who = getattr(agent, "id", agent)
            raise SubagentError(f"{who} is not a live agent of this host", code=code, agent_id=who)

    def _check_admission(self, parent: Agent) -> None:
        if self._closed:
            raise SubagentError("continuations are shutting down", code="DRAINING")
        if parent.id in self._closing:
            raise SubagentError(f"agent {parent.id} is being released; it cannot reach children", code="DRAINING")

    # ------------------------------------------------------------ activations

    def _activate(
        self, agent: LiveAgent, parent_id: str, provider: str, label: str, epoch_start: int, notify: bool
    ) -> Activation:
        act = Activation(agent.id, parent_id, agent, provider, label, epoch_start, notify=notify)
        self._activations[agent.id] = act
        self._owned.setdefault(parent_id, set()).add(agent.id)
        act.watcher = asyncio.get_running_loop().create_task(
            self._watch(act), name=f"settle:{agent.id}", context=_clean_context()
        )
        return act

    def activation(self, child_id: str) -> Activation | None:
        """The resident activation of ``child_id`` (for tools and tests), or ``None``."""
        return self._activations.get(child_id)

    def poke(self, agent_id: str) -> None:
        """Something about ``agent_id`` changed (the app forwards status changes here)."""
        act = self._activations.get(agent_id)
        if act is not None:
            act.poke()

    def _settled(self, act: Activation) -> bool:
        agent = act.agent
        return agent.status == "idle" and not agent.inbox.pending() and not self._owned.get(act.child_id)

    async def _watch(self, act: Activation) -> None:
        """Release ``act`` once it settles; exits when a release starts (by anyone)."""
        agent = act.agent
        while act.releasing is None:
            act.poked.clear()
            await agent.when_idle()
            if act.releasing is not None:
                return
            if self._settled(act):
                async with self._lock(act.child_id):
                    if act.releasing is None and self._settled(act):
                        self._release(act, keep_inbox=True, notice=True).add_done_callback(log_release_failure)
                continue
            await act.poked.wait()

    async def settle(self, child_id: str) -> bool:
        """Wait until the child is idle, then release it if settled; ``True`` when it left.

        A one-shot caller uses this to return only once the child is on disk.
        """
        act = self._activations.get(child_id)
        if act is None:
            return True
        await act.agent.when_idle()
        async with self._lock(child_id):
            if act.releasing is None and self._settled(act):
                self._release(act, keep_inbox=True, notice=False)
        if act.releasing is None:
            return False
        await asyncio.shield(act.releasing)
        return True

    # ------------------------------------------------------------ release

    def _release(self, act: Activation, *, keep_inbox: bool, notice: bool) -> asyncio.Future[None]:
        """Start (once) releasing ``act`` and its resident descendants; returns the memoized task."""
        if act.releasing is None:
            self._closing.add(act.child_id)
            self._busy += 1
            act.releasing = asyncio.get_running_loop().create_task(
                self._do_release(act, keep_inbox, notice), name=f"release:{act.child_id}", context=_clean_context()
            )
            act.poke()
            self._changed()
        return act.releasing

    async def _do_release(self, act: Activation, keep_inbox: bool, notice: bool) -> None:
        agent = act.agent
        results: list[Any] = []
        try:
            # Cancellation spreads top-down (nothing new starts below), disposal bottom-up.
            # A settled child is idle, so this is a no-op on the settlement path.
            agent.cancel(CancelCause("parent", detail="released" if keep_inbox else "drained"), keep_inbox=keep_inbox)
            if not keep_inbox and agent.inbox.pending():  # an idle agent's cancel is a no-op
                agent.inbox.clear()
            owned = list(self._owned.get(act.child_id, ()))
            kids = [self._release(self._activations[c], keep_inbox=keep_inbox, notice=False) for c in owned]
            results = list(await asyncio.gather(*kids, return_exceptions=True))
            await agent.when_idle()
            try:
                await agent.session.flush()
            except Exception as exc:  # best effort: disposal retries the write once more
                log.warning("subagent.final_flush_failed", child=act.child_id, error=str(exc))
            try:
                await self._host.dispose_agent(agent)
            except Exception as exc:
                results.append(exc)
            if notice and act.notify and self.settlement_notices:
                await self._notify_parent(act)
        finally:
            if self._activations.get(act.child_id) is act:
                del self._activations[act.child_id]
            siblings = self._owned.get(act.parent_id)
            if siblings is not None:
                siblings.discard(act.child_id)
                if not siblings:
                    del self._owned[act.parent_id]
            self._closing.discard(act.child_id)
            self._busy -= 1
            parent = self._activations.get(act.parent_id)
            if parent is not None:
                parent.poke()
            self._changed()
            log.info("subagent.released", child=act.child_id, keep_inbox=keep_inbox)
        aggregate(results, f"release of {act.child_id}")

    async def _notify_parent(self, act: Activation) -> None:
        """Tell a live parent that ``act`` settled, with the child's closing message.

        Idle parent: a new turn (``followup``); busy parent: its next step (``steer``).
        The parent is flushed at once: a parent blocked in a long tool call takes no
        checkpoint, and a notice lost in a crash would leave it waiting forever.
        """
        parent = self._host.agents.get(act.parent_id)
        if parent is None or getattr(parent, "disposing", False) or parent.id in self._closing or self._closed:
            return
        outcome = epoch_outcome(act.agent.session.events, act.epoch_start)
        text, source = settlement_notice(act.child_id, act.label, outcome)
        message = user_message(text, source=source)
        try:
            if parent.status == "idle":
                parent.followup(message)
            else:
                parent.steer(message)
            await parent.session.flush()
        except Exception:
            log.exception("subagent.notice_failed", child=act.child_id, parent=parent.id)

    # ------------------------------------------------------------ quiescence and shutdown

    def _changed(self) -> None:
        change, self._change = self._change, None
        if change is not None:
            change.set()

    def _next_change(self) -> asyncio.Event:
        if self._change is None:
            self._change = asyncio.Event()
        return self._change

    def idle(self) -> bool:
        """No start, delivery or release in flight and no settled child awaiting release."""
        if self._busy:
            return False
        return not any(act.releasing is None and self._settled(act) for act in self._activations.values())

    async def quiescent(self) -> None:
        """Wait until every live agent is idle and :meth:`idle` holds at the same instant."""
        while True:
            change = self._next_change()
            busy = [agent for agent in self._host.agents.list() if agent.status != "idle"]
            if busy:
                await asyncio.gather(*(agent.when_idle() for agent in busy))
                continue
            if self.idle():
                return
            await change.wait()

    async def release_children(self, parent: Agent) -> None:
        """Before ``parent`` is disposed: cancel its turn, then release its resident children.

        The host calls this first in every agent disposal, so no child outlives its
        parent resident and orphaned. Cancellation goes top-down (the parent stops
        starting work), release bottom-up; the children's queued mail stays durable.
        """
        closing = parent.id not in self._closing
        if closing:
            self._closing.add(parent.id)
        try:
            parent.cancel(CancelCause("disposed"), keep_inbox=True)
            releases = [
                self._release(self._activations[child_id], keep_inbox=True, notice=False)
                for child_id in list(self._owned.get(parent.id, ()))
            ]
            results = await asyncio.gather(*(asyncio.shield(r) for r in releases), return_exceptions=True)
        finally:
            if closing:
                self._closing.discard(parent.id)
        aggregate(results, f"release of the children of {parent.id}")

    async def close(self) -> None:
        """Refuse new work and release every activation child-first, keeping inboxes.

        Pending messages stay durable for a later cold resume (a shutdown is not a drain).
        """
        self._closed = True
        while self._activations:
            tops = [a for a in self._activations.values() if a.parent_id not in self._activations]
            releases = [self._release(act, keep_inbox=True, notice=False) for act in tops]
            results = await asyncio.gather(*(asyncio.shield(r) for r in releases), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    log.error("subagent.shutdown_release_failed", exc_info=result)
