"""The chat command contract: how a plugin distribution adds ``/commands`` to ``dsh chat``.

``dsh chat`` is a terminal conversation with a run's root agent (the Lead). Some
commands only a plugin can answer (``/team`` reads the live Team service, ``/send``
finds a member by its Team name), and the host must not import a plugin. So a
distribution declares entry points in group :data:`CHAT_ENTRY_POINT_GROUP`
(``dsh.chat``)::

    [project.entry-points."dsh.chat"]
    team = "dsh_team.views.chat:commands"

Each entry point is a callable ``commands() -> Sequence[ChatCommand]``. A command's
``run(context, argument)`` gets a :class:`ChatContext` (the live host, the root
agent, a way to print) and the text after the command's name; it may return an
awaitable. A :class:`~host_spec.errors.DshError` it raises is printed as
``error: <code>: <message>`` and the conversation goes on; the host's built-in
commands (``/help``, ``/exit``) cannot be replaced.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, Protocol

import attrs

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host

__all__ = ["CHAT_ENTRY_POINT_GROUP", "ChatContext", "ChatCommand", "USER_SOURCE"]

#: Entry-point group of chat command contributors.
CHAT_ENTRY_POINT_GROUP: Final = "dsh.chat"

#: The source of a message the person at the terminal typed (what the Lead's own lines carry).
USER_SOURCE: Final = {"kind": "user"}


class ChatContext(Protocol):
    """What the host offers a running chat command."""

    @property
    def host(self) -> Host:
        """The live host of the conversation (its services, sessions, continuations)."""
        ...

    @property
    def root(self) -> Agent:
        """The conversation's root agent (the Lead of a Team)."""
        ...

    def write(self, line: str) -> None:
        """Print one line to the terminal (without disturbing the prompt)."""
        ...


@attrs.frozen
class ChatCommand:
    """One ``/name`` command.

    Attributes:
        name: Typed after ``/`` (lower case letters, digits and ``-``).
        usage: The argument synopsis shown by ``/help`` (``NAME text``), may be empty.
        summary: One line for ``/help``.
        run: ``run(context, argument)``; ``argument`` is the rest of the line, stripped.
    """

    name: str
    usage: str
    summary: str
    run: Callable[[ChatContext, str], Awaitable[None] | None]
