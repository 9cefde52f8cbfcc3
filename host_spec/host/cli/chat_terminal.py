"""The terminal side of ``dsh chat``: input as events, output that keeps the prompt, a progress line.

Everything arrives as one event queue the conversation loop reads: typed lines
(read from the stdin file descriptor on the event loop, never in a thread, so
nothing blocks at exit), end of input, Ctrl-C (a SIGINT handler on the loop: the
process is never interrupted, the loop decides) and "the root went idle" (the
moment to show the prompt again). The terminal stays in canonical mode, so the
line discipline does the editing (backspace, Ctrl-U) and Ctrl-C flushes a
half-typed line.

Output goes through :meth:`ChatTerminal.write`: it clears the progress line,
prints, and puts the prompt back if it was showing, so teammates' lines streaming
in while you type never leave a stray prompt behind. The progress line
(``... working 12s: lead, alice``) appears on a terminal only, after two quiet
seconds of a running turn, and is rewritten in place.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, Final, TextIO

import attrs

from host_spec import hookimpl
from host_spec.events import Event, EventType

from host_spec.host.cli.chat_render import ChatRender
from host_spec.host.cli.transcript import Transcript

__all__ = ["ChatTerminal", "ChatFeed", "PROMPT"]

PROMPT: Final = "> "
#: Quiet time of a running turn before the progress line appears.
PROGRESS_AFTER: Final = 2.0
_CLEAR: Final = "\r\x1b[K"


@attrs.define(eq=False)
class ChatTerminal:
    """Input events and prompt-aware output of one conversation.

    Events are ``("line", text)``, ``("eof", None)``, ``("interrupt", None)`` and ``("idle", None)``.
    """

    out: TextIO = attrs.field(factory=lambda: sys.stdout)
    fd: int | None = None  # default: standard input, looked up by start()
    events: asyncio.Queue[tuple[str, str | None]] = attrs.field(factory=asyncio.Queue)
    prompt_shown: bool = False
    _buffer: bytes = b""
    _status: bool = False
    _last_output: float = attrs.field(factory=time.monotonic)
    _loop: asyncio.AbstractEventLoop | None = None

    @property
    def is_tty(self) -> bool:
        return self.out.isatty()

    def start(self) -> None:
        """Read stdin and take SIGINT on the running loop."""
        if self.fd is None:
            self.fd = sys.stdin.fileno()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.fd, self._readable)
        self._loop.add_signal_handler(signal.SIGINT, self.events.put_nowait, ("interrupt", None))

    def stop(self) -> None:
        """Stop reading and give SIGINT back."""
        if self._loop is not None and self.fd is not None:
            self._loop.remove_reader(self.fd)
            self._loop.remove_signal_handler(signal.SIGINT)
            self._loop = None

    def _readable(self) -> None:
        assert self.fd is not None  # registered by start()
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            if self._buffer:
                self._line(self._buffer)
                self._buffer = b""
            self.events.put_nowait(("eof", None))
            if self._loop is not None:
                self._loop.remove_reader(self.fd)
            return
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line)

    def _line(self, raw: bytes) -> None:
        self.prompt_shown = False  # the terminal echoed the newline: the cursor is on a fresh line
        self.events.put_nowait(("line", raw.decode("utf-8", errors="replace").rstrip("\r")))

    def _emit(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def write(self, line: str) -> None:
        """Print ``line`` above the prompt (and the progress line)."""
        prefix = _CLEAR if (self._status or self.prompt_shown) and self.is_tty else ("\n" if self.prompt_shown else "")
        self._status = False
        self._emit(f"{prefix}{line}\n" + (PROMPT if self.prompt_shown else ""))
        self._last_output = time.monotonic()

    def prompt(self) -> None:
        """Show the prompt (once)."""
        if not self.prompt_shown:
            self._emit((_CLEAR if self._status and self.is_tty else "") + PROMPT)
            self._status = False
            self.prompt_shown = True

    def progress(self, started: float, running: list[str]) -> None:
        """Rewrite the progress line when a turn has been quiet long enough (terminals only)."""
        now = time.monotonic()
        if not self.is_tty or self.prompt_shown or now - self._last_output < PROGRESS_AFTER:
            return
        self._emit(f"{_CLEAR}... working {int(now - started)}s: {', '.join(running)} (Ctrl-C interrupts the lead)")
        self._status = True

    def clear_progress(self) -> None:
        if self._status:
            self._emit(_CLEAR)
            self._status = False


class ChatFeed(Transcript):
    """The transcript of a conversation, member-prefixed, without echoing what the user typed.

    Shortened for a chat by :class:`~host_spec.host.cli.chat_render.ChatRender` (one
    line per tool result, a system reminder once). Also tells the terminal when the
    root goes idle, the moment to prompt again.
    """

    def __init__(self, terminal: ChatTerminal, fallback: Callable[[Any], str]) -> None:
        super().__init__(write=terminal.write, fallback=fallback)
        self.terminal = terminal
        self.root_id: str | None = None
        self.render = ChatRender()

    @hookimpl
    def dsh_session_event(self, session: Any, event: Event) -> None:
        if (session.id == self.root_id and event.type == EventType.USER_MESSAGE
                and (event.value().get("source") or {}).get("kind", "user") == "user"):
            return  # the user's own line, already on the screen
        for line in self.render.lines(self.names.get(session.id) or self.fallback(session), event):
            self.write(line)

    @hookimpl
    def dsh_agent_status(self, agent: Any, status: str) -> None:
        if agent.id == self.root_id and status == "idle":
            self.terminal.events.put_nowait(("idle", None))
