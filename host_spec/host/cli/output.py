"""The CLI's standard output when its reader goes away (``dsh team show | head``).

A Unix tool whose reader leaves is ended by ``SIGPIPE`` without a word; Python
ignores that signal and raises ``BrokenPipeError`` instead, which would surface as
``dsh: IO_ERROR: [Errno 32] Broken pipe`` (or, at the interpreter's own flush at
exit, as an ``Exception ignored`` message). The standard way out (Python's docs,
the note on ``SIGPIPE``) is to point stdout at ``/dev/null`` and go on quietly:

* a one-shot command (``team show``, ``log``, ``trace``) ends at once with
  ``128 + SIGPIPE``, as a tool the signal ended (:func:`reader_gone`);
* a run's transcript (:func:`transcript_line`) stops being written, and the run
  itself goes on to its end: its log, not the screen, is what must be complete.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["silence_stdout", "reader_gone", "transcript_line"]


def silence_stdout() -> None:
    """Point file descriptor 1 at ``/dev/null``: nothing written or flushed later can fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (a test's capture): nothing will flush to a pipe
        pass


def reader_gone() -> int:
    """Silence stdout and return the exit status of a tool ``SIGPIPE`` ended (141)."""
    silence_stdout()
    return 128 + signal.SIGPIPE


def transcript_line(text: str) -> None:
    """``print(text)``, except that a reader that left silences the rest instead of failing every line."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        silence_stdout()
