"""A run's open permission asks, put to the editor as ``session/request_permission``; its answer recorded.

A permission ask is a durable record in the Lead log (``permission/requested``,
then exactly one ``permission/answered``). The editor is one more answerer, beside
the Lead (when delegated), ``dsh chat``, the web panel and the deadline. The Team
plugin provides the asks through the contract's
:class:`~host_spec.permissions.PermissionDesk` (this module never imports the Team):

* every ask of this session's Team the desk records from now on, and every one
  still open when the session starts (an ask open across a crash is asked again
  after ``session/load``), is put to the editor once per agent process
  (:func:`~host_spec.host.acp.permission.ask_editor`: allow once, allow always,
  deny), after the updates queued so far were sent, so the editor already shows
  the tool call the ask is about (its update says it waits for permission);
* the choice is recorded through the desk's one answer path, by ``user``, with
  the reason :data:`REASON`. Someone who answered first wins: the editor's late
  answer is refused with ``PERMISSION_ALREADY_ANSWERED``, logged, and nothing else;
* a cancel (the editor closed the dialog, the prompt was cancelled) answers
  nothing: the ask stays open for the other answerers, or its deadline. An editor
  that went away, or any other failure, is logged; the session goes on.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import structlog
from acp.schema import PermissionOption

from host_spec.errors import DshError
from host_spec.events import json_decode
from host_spec.permissions import OpenAsk, PermissionDesk

from host_spec.host.acp.permission import ALLOW_ONCE, REJECT_ONCE, ask_editor
from host_spec.host.acp.updates import call_title, tool_call_id

__all__ = ["ALLOW_ALWAYS", "OPTIONS", "REASON", "EditorAsks", "ask_call_id", "ask_title"]

log = structlog.get_logger(__name__)

ALLOW_ALWAYS: Final = "allow-always"
#: What the editor offers for every ask, and the desk's answer for each choice.
OPTIONS: Final = (
    PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once"),
    PermissionOption(option_id=ALLOW_ALWAYS, name="Allow always (this session)", kind="allow_always"),
    PermissionOption(option_id=REJECT_ONCE, name="Deny", kind="reject_once"),
)
_ANSWERS: Final = {ALLOW_ONCE: "allow", ALLOW_ALWAYS: "always", REJECT_ONCE: "deny"}
#: Why the answer was given, as recorded.
REASON: Final = "answered in the editor"
ALREADY_ANSWERED: Final = "PERMISSION_ALREADY_ANSWERED"


def ask_call_id(key: str) -> str:
    """The editor's id of the tool call an ask is about (its key is ``member id/turn/step/call id``)."""
    parts = key.split("/", 3)
    return tool_call_id(parts[0], parts[-1])


def _arguments(text: str) -> Any:
    try:
        return json_decode(text.encode())
    except Exception:
        return text


def ask_title(ask: OpenAsk) -> str:
    """What the editor's user is asked: the member, the tool, its argument, the rule that asked."""
    request = ask.request
    return f'{call_title(request.member, request.tool, _arguments(request.arguments))} (rule "{request.rule}")'


class EditorAsks:
    """The asks of one editor session's Team, each put to the editor once (see the module docstring).

    Args:
        desk: The Team's desk. root: The session's Lead (the answers are the user's, through it).
        client: The connection to the editor. session_id: The editor session.
        drained: Waits until the updates queued so far were sent.
    """

    def __init__(self, desk: PermissionDesk, root: Any, client: Any, session_id: str, drained: Any) -> None:
        self.desk, self.root, self.client, self.session_id, self.drained = desk, root, client, session_id, drained
        self.asked: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self._handle = desk.listen(self._recorded)

    def _recorded(self, team_id: str, ask: OpenAsk) -> None:
        if team_id == self.session_id and ask.open:
            self._put(ask)

    def open_now(self) -> None:
        """Put every ask open right now (the session just started or was loaded)."""
        try:
            asks = self.desk.open_asks(self.root)
        except DshError as exc:  # no Team yet: its asks come through the listener
            log.info("acp.no_open_asks", session=self.session_id, code=exc.code)
            return
        for ask in asks:
            self._put(ask)

    def _put(self, ask: OpenAsk) -> None:
        if ask.request.ask_id in self.asked:
            return
        self.asked.add(ask.request.ask_id)
        task = asyncio.get_running_loop().create_task(self._ask(ask))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _ask(self, ask: OpenAsk) -> None:
        ask_id = ask.request.ask_id
        try:
            await self.drained()  # the editor shows the call (waiting) before it is asked about it
            choice = await ask_editor(self.client, self.session_id, tool_call_id=ask_call_id(ask.request.key),
                                      title=ask_title(ask), options=OPTIONS,
                                      raw_input=_arguments(ask.request.arguments))
            if choice is None:
                log.info("acp.permission_cancelled", ask=ask_id, session=self.session_id)
                return
            await self.desk.answer(self.root, ask_id, _ANSWERS[choice], by="user", reason=REASON)
            log.info("acp.permission_answered", ask=ask_id, answer=_ANSWERS[choice])
        except DshError as exc:
            if exc.code == ALREADY_ANSWERED:
                log.info("acp.permission_answered_before", ask=ask_id, session=self.session_id)
            else:
                log.warning("acp.permission_not_answered", ask=ask_id, code=exc.code, error=exc.message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the editor went away, or refused the request: the ask stays open
            log.warning("acp.permission_not_asked", ask=ask_id, error=f"{type(exc).__name__}: {exc}")

    async def close(self) -> None:
        """Stop listening; cancel the asks still waiting for the editor (they stay open in the log)."""
        self._handle.dispose()
        for task in tuple(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
