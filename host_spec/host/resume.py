"""Continue a run a crash cut short: what ``dsh resume`` does after reloading the root.

Reloading an agent closes the turn a crash left open (closers ending in
``turn/end {kind: interrupted}``) and works off its durable pending inbox, but an
interrupted turn with *nothing* pending would simply stay stopped, and a sleeping
child is only reloaded by the next delivery. A crash would then silently end the
run. So after the root is reloaded, :func:`continue_run`:

* gives an **interrupted root with an empty inbox** a ``resume`` notice, which
  starts a turn in which the model sees the closers (``TOOL_OUTCOME_UNKNOWN``:
  verify before repeating) and carries on; a root whose last turn **failed** (an
  unreachable model server, a budget that has since been raised) gets
  :data:`RETRY_NOTICE` the same way, so the ``dsh resume`` a failed run's last
  line names really retries;
* **cold-resumes every direct continuable child with work** -- durable pending
  inbox items (for instance a teammate's initial prompt accepted just before the
  crash), or a turn the crash left open. A child with pending items is only
  reloaded (it starts on them); an interrupted child with nothing pending gets
  the notice, as a steer.

Children without work stay on disk. Only direct children of the root are
considered: a deeper descendant needs its own parent resident to be reached, and
is continued when that parent's work reaches it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs
import structlog

from host_spec.errors import DshError
from host_spec.events import Event, EventType, InboxSplice
from host_spec.messages import text_block, user_message

from host_spec.host.agents.repair import fold_tail

if TYPE_CHECKING:
    from collections.abc import Sequence

    from host_spec.host.agents.agent import Agent

__all__ = ["RESUME_NOTICE", "RESUME_SOURCE", "RETRY_NOTICE", "StoredWork", "stored_work", "continue_run"]

log = structlog.get_logger(__name__)

#: The user message that restarts an interrupted turn after a restart.
RESUME_NOTICE: Final = (
    "The host stopped while you were working and has been restarted. Continue where you left off. "
    "A tool result TOOL_OUTCOME_UNKNOWN means that call may or may not have taken effect: "
    "check before repeating it."
)
#: The user message that retries a root whose last turn ended with an error.
RETRY_NOTICE: Final = (
    "Your last turn stopped with an error and the run has been resumed. Continue where you left off."
)
#: Source of :data:`RESUME_NOTICE` and :data:`RETRY_NOTICE` (it grants nothing; it says where the message came from).
RESUME_SOURCE: Final = {"kind": "resume"}


@attrs.frozen
class StoredWork:
    """What a stored session still has to do.

    Attributes:
        interrupted: Its last turn is open (a crash stopped it mid-turn).
        pending: Unclaimed inbox items (accepted messages no turn has taken yet).
    """

    interrupted: bool
    pending: int

    @property
    def any(self) -> bool:
        return self.interrupted or self.pending > 0


def stored_work(own_events: Sequence[Event]) -> StoredWork:
    """Fold a session's *own* events (never a fork's inherited prefix) into :class:`StoredWork`."""
    pending: set[str] = set()
    for event in own_events:
        if event.type == EventType.INBOX_SPLICED:
            splice = event.decode(InboxSplice)
            pending.difference_update(splice.removed_ids or ())
            pending.update(item["id"] for item in splice.inserted or ())
    return StoredWork(interrupted=fold_tail(own_events).open_turn is not None, pending=len(pending))


async def continue_run(host: Any, root: Agent, *, interrupted: bool, failed: bool = False) -> list[str]:
    """Restart what a crash stopped under a freshly reloaded ``root``; returns the child ids woken.

    Args:
        host: The app host (``continuations``, ``sessions``).
        root: The reloaded root agent (its closers, if any, are already appended).
        interrupted: Whether reloading ``root`` closed an interrupted turn.
        failed: Whether ``root``'s last turn ended with an error (it is retried when
            nothing else is pending).

    A child that cannot be resumed (unreadable log, refused by the continuation
    manager) is logged and skipped: the rest of the run still continues.
    """
    if interrupted and not root.inbox.has_pending():
        root.followup(user_message(RESUME_NOTICE, source=dict(RESUME_SOURCE)))
    elif failed and not root.inbox.has_pending():
        root.followup(user_message(RETRY_NOTICE, source=dict(RESUME_SOURCE)))
    continuations = getattr(host, "continuations", None)
    if continuations is None:
        return []
    woken: list[str] = []
    for child in await continuations.directory.list(root.id):
        if continuations.is_resident(child.child_id):
            continue
        try:
            work = stored_work((await host.sessions.inspect(child.child_id)).own_events())
            if not work.any:
                continue
            if work.pending:
                await continuations.wake(root, child.child_id)
            else:
                # Continuing is not a new delegation: it asks for no settlement notice.
                await continuations.deliver(
                    root, child.child_id, [text_block(RESUME_NOTICE)], source=dict(RESUME_SOURCE), mode="steer", notify=False
                )
        except DshError as exc:
            log.warning("resume.child_not_continued", child=child.child_id, error=str(exc))
            continue
        woken.append(child.child_id)
        log.info("resume.child_continued", child=child.child_id, pending=work.pending, interrupted=work.interrupted)
    return woken
