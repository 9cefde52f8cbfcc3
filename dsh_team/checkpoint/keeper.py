"""Loading a Team checkpoint only when the log confirms it, and saving one off the hot path.

:func:`load_checked` is the one reader: the Team service and the stream
invariant both start a cold Lead session's folds from what it returns, so the
invariant judges the next candidate from exactly the state the service holds.
It returns a checkpoint only when its schema is this build's, it covers no more
than the log holds and its mark matches the log at its seq
(:mod:`dsh_team.checkpoint.codec` says why that suffices); otherwise it says why
in one warning line and returns ``None``, and the caller folds the whole log,
which is always correct.

:class:`CheckpointKeeper` saves: at a clean stop (the Lead session leaves the
live store, or the plugin is torn down) and every ``checkpoint_every`` events,
after a flush that left nothing pending (a checkpoint covers only durable
events). The decision is one dictionary lookup per flush; capturing the folds
is O(state) (they are already current), and the encode and the write run on one
worker thread, in order, so the append path never waits on a checkpoint.
A write that fails is logged and forgotten: the next one, or the full fold,
covers it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

import msgspec
import structlog

from dsh_team.checkpoint.codec import TeamCheckpoint, decode_checkpoint, encode_checkpoint, mark_of

if TYPE_CHECKING:
    from host_spec.events import Event, SessionHeader
    from host_spec.protocols import Session
    from host_spec.storage import Checkpoints

__all__ = ["NAME", "CheckpointKeeper", "CheckpointSource", "load_checked", "mismatch"]

log = structlog.get_logger(__name__)

#: The checkpoint name the Team's folds are saved under.
NAME: Final = "team"


def mismatch(checkpoint: TeamCheckpoint, seq: int, header: SessionHeader, events: Sequence[Event]) -> str | None:
    """Why ``checkpoint`` (stored as covering ``seq``) does not fit this log, or ``None`` when it does."""
    if checkpoint.seq != seq:
        return f"it says seq {checkpoint.seq} where the store says {seq}"
    if checkpoint.team_id != header.id:
        return f"it is the checkpoint of {checkpoint.team_id!r}"
    if seq < 1:
        return "it covers no event"
    if seq > len(events):
        return f"it covers seq {seq} but the log holds {len(events)} events"
    if checkpoint.mark != mark_of(header, events[seq - 1]):
        return f"the log differs at seq {seq}"
    return None


def load_checked(checkpoints: Checkpoints | None, header: SessionHeader, events: Sequence[Event]) -> TeamCheckpoint | None:
    """The saved checkpoint of ``header.id`` when the log (``events``) confirms it, else ``None``.

    A checkpoint that does not fit is ignored with one ``team.checkpoint_ignored``
    warning naming the reason; none saved, or no store for them, says nothing.
    """
    if checkpoints is None or not events:
        return None
    try:
        found = checkpoints.load(header.id, NAME)
    except OSError as exc:
        log.warning("team.checkpoint_ignored", team=header.id, reason=f"unreadable: {exc}")
        return None
    if found is None:
        return None
    seq, payload = found
    try:
        checkpoint = decode_checkpoint(payload)
    except msgspec.DecodeError as exc:
        reason: str | None = f"unreadable: {exc}"
    else:
        reason = mismatch(checkpoint, seq, header, events)
    if reason is not None:
        log.warning("team.checkpoint_ignored", team=header.id, seq=seq, reason=reason)
        return None
    return checkpoint


@runtime_checkable
class CheckpointSource(Protocol):
    """A plugin that already read a cold session's checkpoint (the invariant, seeding its fold).

    The Team service starts its folds from the same checkpoint, so the log's
    checkpoint is read, checked and (when it does not fit) reported once, and the
    invariant judges the next candidate from exactly the state the service holds.
    """

    def checkpoint(self, session: Session) -> TeamCheckpoint | None:
        """The checked checkpoint this plugin's fold of ``session`` started from, handed over once.

        Seeds the fold on first use; ``None``: it started from the log's first event
        (or from a fold carried in this process), or it was handed over already.
        """
        ...


#: Builds the checkpoint of a live session's folds at its last event (``None``: it leads no Team).
FoldCapture = Callable[["Session"], "TeamCheckpoint | None"]


class CheckpointKeeper:
    """When to save each live Lead session's checkpoint, and the thread that writes them.

    Args:
        checkpoints: Where they go (``None``: the store keeps none; nothing is saved).
        every: Save after this many events since the last checkpoint (``0``: only at a clean stop).
        capture: Builds a session's checkpoint from the live folds.
    """

    def __init__(self, checkpoints: Checkpoints | None, every: int, capture: FoldCapture) -> None:
        self._checkpoints = checkpoints
        self._every = every
        self._capture = capture
        #: Session id -> seq of its newest checkpoint (loaded or saved).
        self._saved: dict[str, int] = {}
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: set[concurrent.futures.Future[None]] = set()

    def load(self, session: Session, provider: CheckpointSource | None = None) -> TeamCheckpoint | None:
        """The checked checkpoint a session that just became live starts from (its seq remembered).

        With a fold provider (the invariant) it is the one the provider's fold
        started from, so the checkpoint is read and checked once; without one,
        :func:`load_checked`.
        """
        if provider is not None:
            checkpoint = provider.checkpoint(session)
        else:
            checkpoint = load_checked(self._checkpoints, session.header, session.events)
        if checkpoint is not None:
            self._saved[session.id] = checkpoint.seq
        return checkpoint

    def flushed(self, session: Session, durable_seq: int) -> None:
        """A flush made ``session`` durable up to ``durable_seq``: save when ``every`` events passed."""
        every = self._every
        if every and durable_seq - self._saved.get(session.id, 0) >= every:
            self.save(session)

    def save(self, session: Session) -> bool:
        """Save ``session``'s checkpoint now when everything it holds is durable; whether one was queued."""
        checkpoints = self._checkpoints
        seq = session.last_seq
        if checkpoints is None or session.durable_seq != seq or self._saved.get(session.id, 0) >= seq:
            return False
        checkpoint = self._capture(session)
        if checkpoint is None:
            self._saved[session.id] = seq  # not a Team (yet): asked again after another ``every`` events
            return False
        self._saved[session.id] = seq
        if self._writer is None:
            self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dsh-team-checkpoint")
        future = self._writer.submit(_write, checkpoints, checkpoint)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return True

    def forget(self, session: Session) -> None:
        """``session`` leaves the live store (a clean stop when it is flushed): save, then forget it."""
        self.save(session)
        self._saved.pop(session.id, None)

    async def drain(self) -> None:
        """Wait for every queued write, then stop the writer thread (plugin teardown)."""
        pending = list(self._pending)
        if pending:
            await asyncio.gather(*(asyncio.wrap_future(future) for future in pending))
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown(wait=True)


def _write(checkpoints: Checkpoints, checkpoint: TeamCheckpoint) -> None:
    """Encode and store one checkpoint (on the writer thread); a failure is logged, never raised."""
    try:
        checkpoints.save(checkpoint.team_id, NAME, checkpoint.seq, encode_checkpoint(checkpoint))
    except OSError as exc:
        log.warning("team.checkpoint_unsaved", team=checkpoint.team_id, seq=checkpoint.seq, error=str(exc))
