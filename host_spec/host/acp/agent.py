"""The Lead as an Agent Client Protocol agent: the methods an editor calls (``acp.Agent``).

* ``initialize``: protocol version, and what we offer: ``session/load``, MCP
  servers over stdio, HTTP and SSE, prompts with embedded context (text).
* ``session/new`` / ``session/load``: :mod:`host_spec.host.acp.session` (a host per
  editor session; the session id is the run's root id).
* ``session/prompt``: the prompt becomes the Lead's next message (a follow-up,
  as a line typed in ``dsh chat``); the answer comes when the Lead turn that took
  it ends (:mod:`host_spec.host.acp.turns`), after every update of the turn was
  sent. An ``error`` turn fails the request with the turn's code and message.
* ``session/cancel``: cancels the Lead's running turn, inbox kept (Ctrl-C in chat).
* permission asks of the session's Team go to the editor as
  ``session/request_permission`` (:mod:`host_spec.host.acp.asks`).

A :class:`~host_spec.errors.DshError` becomes a JSON-RPC error whose message is
``CODE: message`` and whose data carries ``{"code": CODE}``.
"""

from __future__ import annotations

from typing import Any, Final

import acp
from acp import RequestError
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
)
import structlog

from host_spec.errors import DshError
from host_spec.messages import text_block, user_message
from host_spec.records import CancelCause

from host_spec.host.acp.feed import UpdateSender
from host_spec.host.acp.session import AcpOptions, RunSession, open_new, open_stored
from host_spec.host.acp.turns import stop_reason

__all__ = ["DshAgent", "AGENT_NAME", "prompt_blocks", "request_error"]

log = structlog.get_logger(__name__)

#: How the agent names itself to the editor.
AGENT_NAME: Final = "dsh"


def request_error(exc: DshError) -> RequestError:
    """A typed error as the JSON-RPC error the editor shows."""
    return RequestError(-32603, f"{exc.code}: {exc.message}", {"code": exc.code})


def prompt_blocks(prompt: list[Any]) -> list[dict[str, Any]]:
    """The prompt's content as the Lead's message blocks (text only, as ``initialize`` offers).

    Text is kept; a resource link becomes a line naming it (``@uri``), an embedded text
    resource its text, fenced and named by its URI.

    Raises:
        RequestError: ``invalid_params`` for an image, audio or binary block (not offered).
    """
    blocks: list[dict[str, Any]] = []
    for block in prompt:
        kind = getattr(block, "type", None)
        if kind == "text":
            blocks.append(text_block(block.text))
        elif kind == "resource_link":
            blocks.append(text_block(f"@{block.uri}"))
        elif kind == "resource" and getattr(block.resource, "text", None) is not None:
            resource = block.resource
            blocks.append(text_block(f"\n<context uri=\"{resource.uri}\">\n{resource.text}\n</context>\n"))
        else:
            raise RequestError.invalid_params({"reason": f"dsh acp reads text prompts only, got a {kind} block"})
    if not blocks:
        raise RequestError.invalid_params({"reason": "the prompt is empty"})
    return blocks


class DshAgent:
    """The agent side of ``dsh acp``: one run per editor session."""

    def __init__(self, options: AcpOptions, version: str) -> None:
        self.options, self.version = options, version
        self.client: Any = None
        self.sessions: dict[str, RunSession] = {}

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    def _sender(self) -> UpdateSender:
        client = self.client

        async def send(session_id: str, update: Any) -> None:
            await client.session_update(session_id=session_id, update=update)

        return UpdateSender(send)

    def _run(self, session_id: str) -> RunSession:
        run = self.sessions.get(session_id)
        if run is None:
            raise RequestError.invalid_params({"reason": f"no open session {session_id} (session/new or session/load)"})
        return run

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                mcp_capabilities=McpCapabilities(http=True, sse=True),
                prompt_capabilities=PromptCapabilities(embedded_context=True),
            ),
            agent_info=Implementation(name=AGENT_NAME, title="dsh Agent Team", version=self.version),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        try:
            run = await open_new(self.options, cwd, mcp_servers, self._sender())
        except DshError as exc:
            raise request_error(exc) from None
        self.sessions[run.id] = run
        run.ask_editor(self.client)
        log.info("acp.session_new", session=run.id, cwd=cwd)
        return NewSessionResponse(session_id=run.id)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           **kwargs: Any) -> LoadSessionResponse:
        if session_id in self.sessions:
            raise RequestError.invalid_params({"reason": f"session {session_id} is already open in this agent"})
        try:
            run = await open_stored(self.options, session_id, mcp_servers, self._sender())
        except DshError as exc:
            raise request_error(exc) from None
        self.sessions[run.id] = run
        run.ask_editor(self.client)  # asks left open by a crash are asked again here
        log.info("acp.session_load", session=run.id)
        return LoadSessionResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        run = self._run(session_id)
        message = user_message(prompt_blocks(prompt))
        wait = run.feed.turns.add(message.id)
        try:
            run.root.followup(message)
        except DshError as exc:
            run.feed.turns.drop(wait)
            raise request_error(exc) from None
        reason = await wait.done
        await run.feed.sender.drained()
        stop = stop_reason(reason)
        if stop is None:
            error = reason.get("error") or {}
            code = str(error.get("code") or "UNKNOWN")
            raise RequestError(-32603, f"{code}: {error.get('message') or 'the turn failed'}", {"code": code})
        return PromptResponse(stop_reason=stop)  # type: ignore[arg-type]

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        run = self.sessions.get(session_id)
        if run is None:
            return
        run.feed.turns.cancel()
        if run.root.status == "running":
            run.root.cancel(CancelCause("user", "session/cancel"), keep_inbox=True)
        else:
            run.feed.turns.idle()

    async def close(self) -> None:
        """Close every open session's host (the editor went away)."""
        for session_id in list(self.sessions):
            run = self.sessions.pop(session_id)
            try:
                await run.close()
            except Exception as exc:
                log.warning("acp.close_failed", session=session_id, error=f"{type(exc).__name__}: {exc}")
