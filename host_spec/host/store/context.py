"""Execution context the host threads through appends without passing it around.

Every event records its :class:`~host_spec.events.Cause` (which agent, which tool
call). The turn loop and the tool executor know the cause; the code that appends
(plugins, tools, services) usually does not. A :class:`contextvars.ContextVar`
carries it across ``await`` points and into tasks spawned from the scope, so
``Session.append`` can stamp it when the caller passes no explicit cause.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

from host_spec.events import Cause

__all__ = ["current_cause", "cause_scope"]

current_cause: Final[ContextVar[Cause | None]] = ContextVar("dsh_current_cause", default=None)


@contextmanager
def cause_scope(cause: Cause | None) -> Iterator[Cause | None]:
    """Make ``cause`` the default cause of appends made inside the ``with`` block.

    Scopes nest; leaving one restores the outer cause even when the block raises.
    """
    token = current_cause.set(cause)
    try:
        yield cause
    finally:
        current_cause.reset(token)
