"""One resident continuable child, and the pure folds the continuation manager needs.

A continuable child is a durable session that may be *resident* (an agent is
loaded for it: an :class:`Activation`) or asleep on disk. Everything the manager
derives about a child -- whether it is settled, why its epoch stopped, what it
said last -- is computed from live status and the child's own events, never
stored, so a cold resume rebuilds it from the log alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
import msgspec

from host_spec.errors import SubagentError
from host_spec.events import Event, EventType, SubagentDescriptor
from host_spec.messages import message_text

if TYPE_CHECKING:
    from host_spec.host.agents.agent import Agent

__all__ = [
    "DESCRIPTOR_VERSION",
    "Activation",
    "EpochOutcome",
    "fold_descriptor",
    "epoch_outcome",
    "settlement_notice",
]

DESCRIPTOR_VERSION: Final = 2
_SUMMARY_LIMIT: Final = 120

#: turn/end reason kind -> epoch stop reason.
_STOP_REASONS: Final = {
    "completed": "completed",
    "aborted": "aborted",
    "interrupted": "aborted",
    "error": "error",
    "blocked": "refusal",
    "max-tokens": "max-tokens",
}
_NOTICE_PHRASES: Final = {
    "completed": "finished and will do no further work unless you send it more.",
    "aborted": "was stopped before it finished.",
    "max-tokens": "ran out of room before it finished.",
    "refusal": "declined the task.",
    "error": "failed before it finished.",
}


def fold_descriptor(events: Sequence[Event]) -> SubagentDescriptor | None:
    """The child's descriptor: the first ``subagent/descriptor`` in ``events``.

    Pass ``session.own_events()``: an inherited (fork-prefix) descriptor belongs to
    an ancestor and must not shadow the child's own. A descriptor of another
    version folds to ``None`` (this host cannot tell how to resume it).

    Raises:
        SubagentError: ``INVALID_DESCRIPTOR`` for a malformed version-2 payload.
    """
    for event in events:
        if event.type != EventType.SUBAGENT_DESCRIPTOR:
            continue
        value = event.value()
        if not isinstance(value, dict) or value.get("version") != DESCRIPTOR_VERSION:
            return None
        try:
            return event.decode(SubagentDescriptor)
        except msgspec.ValidationError as exc:
            raise SubagentError(
                f"malformed subagent descriptor at seq {event.seq}: {exc}", code="INVALID_DESCRIPTOR", seq=event.seq
            ) from exc
    return None


@attrs.frozen
class EpochOutcome:
    """How an activation epoch ended: a stop reason and the last non-empty assistant text."""

    stop_reason: str
    closing: str | None


def epoch_outcome(events: Sequence[Event], start: int) -> EpochOutcome:
    """Fold ``events[start:]`` backwards for the last ``turn/end`` and assistant text.

    Stop reasons: ``completed`` (also when no turn ran), ``aborted``, ``error``,
    ``refusal`` (a blocked turn) and ``max-tokens``.
    """
    reason: str | None = None
    closing: str | None = None
    for index in range(len(events) - 1, start - 1, -1):
        event = events[index]
        if reason is None and event.type == EventType.TURN_END:
            kind = (event.value().get("reason") or {}).get("kind", "completed")
            reason = _STOP_REASONS.get(kind, "error")
        elif closing is None and event.type == EventType.ASSISTANT_MESSAGE:
            text = message_text(event.value().get("content") or []).strip()
            closing = text or None
        if reason is not None and closing is not None:
            break
    return EpochOutcome(stop_reason=reason or "completed", closing=closing)


def settlement_notice(child_id: str, label: str, outcome: EpochOutcome) -> tuple[str, dict[str, Any]]:
    """The text and source of the notice a parent gets when a child settles."""
    phrase = _NOTICE_PHRASES.get(outcome.stop_reason, _NOTICE_PHRASES["error"])
    tail = f"Its closing message:\n{outcome.closing}" if outcome.closing else "It left no closing message."
    text = f"Background subagent {child_id} ({label}) {phrase}\n{tail}"
    summary = f"subagent {label} {outcome.stop_reason}"[:_SUMMARY_LIMIT]
    source = {"kind": "subagent-settled", "form": "notice", "summary": summary, "sender_session_id": child_id}
    return text, source


@attrs.define(eq=False)
class Activation:
    """A resident child: its agent, its lineage edge, and its release bookkeeping.

    Attributes:
        child_id: The child's session (and agent) id.
        parent_id: The exact direct parent (the persisted header's ``parent_session``).
        agent: The loaded agent; the only one for this child while the activation lives.
        provider: The provider named in the descriptor (``spawn``, ``fork`` ...).
        label: The descriptor label, used in notices and listings.
        epoch_start: Index into ``session.events`` where this epoch's work begins.
        notify: Whether a delivery accepted in this epoch asked for a settlement notice.
        releasing: The memoized release (also the admission cutoff), once started.
        watcher: The settlement watcher task.
        poked: Set when something that may change settlement happened.
    """

    child_id: str
    parent_id: str
    agent: Agent
    provider: str
    label: str
    epoch_start: int
    notify: bool = False
    releasing: asyncio.Future[None] | None = None
    watcher: asyncio.Task[None] | None = None
    poked: asyncio.Event = attrs.field(factory=asyncio.Event)

    def poke(self) -> None:
        self.poked.set()
