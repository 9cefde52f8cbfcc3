"""The panel's Starlette application: the page, its JSON API, the event stream.

Safe by default, because a Team panel can steer agents that write code:

* every request carries the per-run token (``?token=`` or header ``X-Dsh-Token``;
  the page passes it on to its own script, style sheet, API calls and stream),
  compared in constant time; without it the answer is ``403 WEB_BAD_TOKEN``;
* a state-changing request is a ``POST`` whose ``Origin`` is the panel's own
  (``403 WEB_BAD_ORIGIN``) and whose body is a JSON object
  (``415 WEB_NOT_JSON``, ``400 WEB_BAD_JSON``); a stored run refuses them
  (``405 WEB_READ_ONLY``), and so does a Team followed from a shared store while
  another process runs it (``409 TEAM_RUN_LIVE``, naming that process);
* files are served only from the package's ``static`` directory.

Web-level errors are ``{"error": {"code", "message"}}`` with a 4xx status; Team
outcomes are 200 responses (see :mod:`dsh_team.web.steering`).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import msgspec
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from dsh_team.web.document import PanelFold, document
from dsh_team.web.steering import Steering
from dsh_team.web.stream import Feed

__all__ = ["STATIC_DIR", "TOKEN_HEADER", "build_app", "read_only", "WebError"]

#: The only directory files are served from.
STATIC_DIR: Final = Path(__file__).with_name("static")
#: Header alternative to ``?token=``.
TOKEN_HEADER: Final = "x-dsh-token"
#: sse-starlette's keep-alive comment interval (seconds): finds dropped clients.
PING_SECONDS: Final = 15

_decoder: Final = msgspec.json.Decoder()


class WebError(Exception):
    """A request the panel refuses before any Team code runs.

    Args:
        status: The HTTP status.
        code: Stable ``WEB_*`` code.
        message: What was wrong.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> JSONResponse:
        return JSONResponse({"error": {"code": self.code, "message": self.message}}, status_code=self.status)


def read_only() -> WebError:
    """What a panel of a stored run answers to a change."""
    return WebError(405, "WEB_READ_ONLY", "this panel shows a stored run; it cannot change it")


class _Guard:
    """ASGI middleware: the token on every request, Origin on every state change."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            try:
                self._check(request)
            except WebError as error:
                await error.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _check(self, request: Request) -> None:
        given = request.query_params.get("token") or request.headers.get(TOKEN_HEADER) or ""
        if not hmac.compare_digest(given.encode(), self.token):
            raise WebError(403, "WEB_BAD_TOKEN", "a valid panel token is required (see the URL dsh printed)")
        if request.method not in ("GET", "HEAD"):
            origin = request.headers.get("origin")
            own = f"{request.url.scheme}://{request.headers.get('host', '')}"
            if origin != own:
                raise WebError(403, "WEB_BAD_ORIGIN", f"cross-origin request refused (Origin {origin!r})")


async def _body(request: Request) -> dict[str, Any]:
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise WebError(415, "WEB_NOT_JSON", "a state change needs a JSON body (Content-Type: application/json)")
    try:
        body = _decoder.decode(await request.body())
    except msgspec.DecodeError as error:
        raise WebError(400, "WEB_BAD_JSON", f"malformed JSON body: {error}") from None
    if not isinstance(body, dict):
        raise WebError(400, "WEB_BAD_JSON", "the JSON body must be an object")
    return body


def _position(request: Request, name: str) -> int | None:
    text = request.query_params.get(name)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise WebError(400, "WEB_BAD_POSITION", f"{name} must be an integer, got {text!r}") from None
    if value < 0:
        raise WebError(400, "WEB_BAD_POSITION", f"{name} must be 0 or more, got {value}")
    return value


Handler = Callable[[Request], Awaitable[Response]]


def _errors(handler: Handler) -> Handler:
    async def guarded(request: Request) -> Response:
        try:
            return await handler(request)
        except WebError as error:
            return error.response()

    return guarded


def build_app(feed: Feed, token: str, steering: Steering | None = None, *,
              refusal: Callable[[], Awaitable[WebError]] | None = None) -> Starlette:
    """The panel application for ``feed`` (read-only without ``steering``; ``app.state.feed`` is ``feed``).

    ``refusal`` says why a read-only panel refuses a change (default: ``405 WEB_READ_ONLY``,
    a stored run); a Team followed from a shared store names the process that runs it.
    """
    source = feed.source
    page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")

    async def index(request: Request) -> Response:
        return HTMLResponse(page.replace("{{token}}", token), headers={"Cache-Control": "no-store"})

    async def team(request: Request) -> Response:
        at = _position(request, "at")
        doc = feed.document()
        if doc is None:
            raise WebError(503, "WEB_NO_TEAM", "the run has no Lead session yet; retry shortly")
        if at is not None and at != doc["at"]:
            if at > doc["at"]:
                raise WebError(400, "WEB_BAD_POSITION", f"at {at} is beyond the Lead log ({doc['at']} events)")
            fold = PanelFold(doc["team_id"])
            fold.advance(source.events, at)
            doc = document(fold, log_length=doc["log_length"], writes=source.writes(fold.state, fold.time),
                           usage=source.usage(fold.state, fold.time), git=source.worktrees)
        doc["read_only"] = steering is None
        return JSONResponse(doc)

    async def events(request: Request) -> Response:
        last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
        try:
            last_id = int(last) if last else None
        except ValueError:
            last_id = None  # not one of ours: start over with a snapshot
        queue = feed.open(last_id)
        return EventSourceResponse(feed.stream(queue), ping=PING_SECONDS, headers={"Cache-Control": "no-store"})

    def steer(work: Callable[[Steering, Request, dict[str, Any]], Awaitable[dict[str, Any]]]) -> Handler:
        async def handler(request: Request) -> Response:
            if steering is None:
                raise await refusal() if refusal is not None else read_only()
            body = await _body(request)
            return JSONResponse(await work(steering, request, body))

        return _errors(handler)

    routes = [
        Route("/", index),
        Route("/api/team", _errors(team)),
        Route("/api/events", events),
        Route("/api/tasks", steer(lambda s, r, b: s.create_task(b)), methods=["POST"]),
        Route("/api/tasks/{task_id}", steer(lambda s, r, b: s.update_task(r.path_params["task_id"], b)),
              methods=["POST"]),
        Route("/api/mode", steer(lambda s, r, b: s.set_enabled(b)), methods=["POST"]),
        Route("/api/plans/{member}", steer(lambda s, r, b: s.decide_plan(r.path_params["member"], b)),
              methods=["POST"]),
        Route("/api/messages", steer(lambda s, r, b: s.send(b)), methods=["POST"]),
        Route("/api/permissions/{ask_id}", steer(lambda s, r, b: s.answer_permission(r.path_params["ask_id"], b)),
              methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR)),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(_Guard, token=token)
    app.state.feed = feed
    return app
