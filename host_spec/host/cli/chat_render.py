"""How ``dsh chat`` shows a conversation: short enough that the conversation stays readable.

``dsh run`` prints the whole transcript (:mod:`host_spec.host.cli.transcript`);
in a chat that is mostly noise, so two kinds of text are shortened on screen
(the session log keeps everything, and ``dsh log`` prints it):

* a tool result is **one line** of at most :data:`RESULT_WIDTH` characters, with
  its number when it was cut (``#3 +812 chars, /last 3``); ``/last`` prints the
  newest result in full, ``/last N`` result ``N`` (the last :data:`KEPT_RESULTS`
  are kept);
* a ``<system-reminder>`` block (the identity reminder opening each teammate's
  first message) is printed in full the first time only; later ones are one
  ``(system reminder, as above)`` line.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Final

import attrs

from host_spec.events import Event, EventType
from host_spec.messages import message_text

from host_spec.host.cli.transcript import render_event, user_lines

__all__ = ["ChatRender", "RESULT_WIDTH", "KEPT_RESULTS"]

#: The longest tool result line, before its ``#N +M chars`` mark.
RESULT_WIDTH: Final = 100
#: Tool results ``/last N`` can print in full.
KEPT_RESULTS: Final = 200
_REMINDER_OPEN: Final = "<system-reminder>"
_REMINDER_SEEN: Final = {"type": "text", "text": "(system reminder, as above)"}


def _is_reminder(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and str(block.get("text", "")).lstrip().startswith(
        _REMINDER_OPEN)


@attrs.define(eq=False)
class ChatRender:
    """The chat's lines for each event, and the full tool results ``/last`` prints."""

    _results: OrderedDict[int, tuple[str, str]] = attrs.field(factory=OrderedDict)
    _count: int = 0
    _reminded: bool = False

    def lines(self, name: str, event: Event) -> list[str]:
        """The screen lines of one event (none for bookkeeping events)."""
        if event.type == EventType.TOOL_RESULT:
            return [self._result(name, event.value())]
        if event.type == EventType.USER_MESSAGE:
            value = event.value()
            content = value.get("content") or []
            if any(_is_reminder(block) for block in content):
                if self._reminded:
                    content = [_REMINDER_SEEN if _is_reminder(block) else block for block in content]
                self._reminded = True
                return user_lines(name, value, content)
        return render_event(name, event)

    def _result(self, name: str, value: dict[str, Any]) -> str:
        self._count += 1
        number = self._count
        marker = " (error)" if value.get("is_error") else ""
        head = f"[{name}] tool result {value.get('name')}{marker}"
        text = message_text(value.get("content") or [])
        self._results[number] = (head, text)
        while len(self._results) > KEPT_RESULTS:
            self._results.popitem(last=False)
        line = " ".join(text.split())
        if len(line) <= RESULT_WIDTH:
            return f"{head} {line}" if line == text else f"{head} {line} (#{number}, /last {number})"
        return f"{head} {line[:RESULT_WIDTH]}... (#{number} +{len(line) - RESULT_WIDTH} chars, /last {number})"

    def last(self, argument: str) -> list[str]:
        """``/last [N]``: tool result ``N`` (default: the newest) in full."""
        if not self._results:
            return ["(no tool result yet)"]
        if not argument:
            number = next(reversed(self._results))
        elif argument.isdigit() and int(argument) in self._results:
            number = int(argument)
        else:
            first, newest = next(iter(self._results)), next(reversed(self._results))
            return [f"(no tool result {argument}: /last N shows one of #{first}..#{newest})"]
        head, text = self._results[number]
        return [f"{head} #{number}:", *(text.splitlines() or [""])]
