"""Which Lead turn answers a ``session/prompt``, and how that turn ended.

A prompt is a follow-up message to the Lead (:meth:`Agent.followup`), exactly as
a line typed in ``dsh chat``. The Lead may be busy with a turn of its own when
it arrives (Team mail wakes it between prompts), so the turn that answers the
prompt is the one that *claims* the message: its ``user/message`` event carries
the message id. When that turn ends, the prompt's wait ends with the turn's
reason (:data:`STOP_REASONS` maps it to the protocol's stop reason).

``session/cancel`` cancels the Lead's running turn (inbox kept, as Ctrl-C in
chat): every waiting prompt ends ``cancelled`` when that turn ends. A prompt
whose message was not claimed yet stays queued and runs before the next one, as
a typed-ahead line in chat does; nothing accepted is dropped. A Lead that goes
idle with a waiting prompt unclaimed was refused its turn before it started (a
plugin refused the model call, e.g. a budget): the wait ends with
``ACP_TURN_NOT_STARTED``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import attrs

__all__ = ["NOT_STARTED", "STOP_REASONS", "PromptTurn", "TurnWaits", "stop_reason"]

#: ``turn/end`` reason kind -> the protocol's ``stopReason`` (an ``error`` turn fails the request instead).
STOP_REASONS: Final = {"completed": "end_turn", "aborted": "cancelled"}
#: The reason a prompt ends with when the Lead stopped without claiming it.
NOT_STARTED: Final = {"kind": "error", "error": {
    "code": "ACP_TURN_NOT_STARTED",
    "message": "the Lead did not start a turn for this prompt: a plugin refused its model call "
               "(dsh log shows why); the prompt stays queued for the next turn",
}}
_CANCELLED: Final = {"kind": "aborted"}


def stop_reason(reason: dict[str, Any]) -> str | None:
    """The ``stopReason`` of a turn that ended with ``reason``; ``None`` for an error."""
    return STOP_REASONS.get(str(reason.get("kind")))


@attrs.define(eq=False)
class PromptTurn:
    """One prompt waiting for the Lead turn that answers it."""

    message_id: str
    done: asyncio.Future[dict[str, Any]]
    claimed: bool = False
    cancelled: bool = False


class TurnWaits:
    """The prompts of one editor session waiting for their Lead turns."""

    def __init__(self) -> None:
        self._waits: list[PromptTurn] = []

    def add(self, message_id: str) -> PromptTurn:
        wait = PromptTurn(message_id, asyncio.get_running_loop().create_future())
        self._waits.append(wait)
        return wait

    def drop(self, wait: PromptTurn) -> None:
        """Forget a prompt whose message never reached the Lead."""
        if wait in self._waits:
            self._waits.remove(wait)

    def claimed(self, message_id: object) -> None:
        """A Lead turn took the message ``message_id`` (its ``user/message`` was committed)."""
        for wait in self._waits:
            if wait.message_id == message_id:
                wait.claimed = True

    def cancel(self) -> None:
        """``session/cancel``: every waiting prompt ends ``cancelled`` with the Lead's running turn."""
        for wait in self._waits:
            wait.cancelled = True

    def turn_ended(self, reason: dict[str, Any]) -> None:
        """The Lead closed a turn: the prompts it claimed (and the cancelled ones) are answered."""
        for wait in list(self._waits):
            if wait.claimed:
                self._finish(wait, _CANCELLED if wait.cancelled else reason)
            elif wait.cancelled:
                self._finish(wait, _CANCELLED)

    def idle(self) -> None:
        """The Lead stopped: nothing still waiting will be answered by a turn now."""
        for wait in list(self._waits):
            self._finish(wait, _CANCELLED if wait.cancelled else NOT_STARTED)

    def _finish(self, wait: PromptTurn, reason: dict[str, Any]) -> None:
        self._waits.remove(wait)
        if not wait.done.done():
            wait.done.set_result(reason)
