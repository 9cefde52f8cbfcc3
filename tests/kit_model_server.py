"""A real chat-completions server on 127.0.0.1 for the ``openai:`` adapter tests (stdlib only).

The server answers ``POST /v1/chat/completions`` (streamed when the request asks,
else one JSON body) from a *responder*: a function of the parsed request that
returns one :class:`Reply`. Every request is recorded (body and headers), so a
test can check exactly what went over the wire.

Reply builders:

* :func:`text` / :func:`calls`: a normal assistant step. ``split`` cuts each
  call's ``arguments`` into pieces of that many characters, so the JSON arrives
  split mid-token across deltas; ``usage`` adds the usage chunk.
* :class:`Status`: an HTTP error (``429`` with ``Retry-After: 0`` ...).
* :class:`Raw`: arbitrary bytes (a server that does not speak JSON).
* :class:`Slow`: a stream that sends one text delta every ``every`` seconds for a
  long time; the server records when the client hangs up (``disconnects``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

__all__ = ["Reply", "Status", "Raw", "Slow", "ModelServer", "text", "calls", "by_agent"]


@attrs.frozen
class Reply:
    """A normal step: ``content`` text and ``tool_calls`` ``(id, name, arguments text)``."""

    content: str = ""
    tool_calls: tuple[tuple[str, str, str], ...] = ()
    split: int = 0
    usage: dict[str, Any] | None = None
    finish: str | None = None  # default: tool_calls when there are calls, else stop


@attrs.frozen
class Status:
    code: int
    message: str = "error"
    headers: dict[str, str] = attrs.Factory(dict)


@attrs.frozen
class Raw:
    body: bytes
    content_type: str = "text/html"


@attrs.frozen
class Slow:
    every: float = 0.1
    count: int = 6000


def text(content: str, *, usage: tuple[int, int] | None = (11, 3), cached: int | None = None) -> Reply:
    return Reply(content=content, usage=_usage(usage, cached))


def calls(*items: tuple[str, dict[str, Any] | str], split: int = 0, content: str = "",
          usage: tuple[int, int] | None = (20, 7), cached: int | None = None) -> Reply:
    """Tool calls ``(name, arguments)``; a ``str`` argument is sent verbatim (malformed JSON on purpose)."""
    built = tuple(
        (f"call_{i}", name, args if isinstance(args, str) else json.dumps(args)) for i, (name, args) in enumerate(items)
    )
    return Reply(content=content, tool_calls=built, split=split, usage=_usage(usage, cached))


def _usage(usage: tuple[int, int] | None, cached: int | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    out: dict[str, Any] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def by_agent(routes: dict[str, list[Any]], *, default: Any = None) -> Callable[[dict[str, Any]], Any]:
    """A responder that keys scripts by a marker in the first user message (``"[alice]"`` ...)."""
    lock = threading.Lock()

    def respond(request: dict[str, Any]) -> Any:
        first = next((m.get("content") or "" for m in request["messages"] if m["role"] == "user"), "")
        with lock:
            for marker, steps in routes.items():
                if marker in first:
                    return steps.pop(0) if steps else (default or text(f"{marker} done"))
        return default or text("done")

    return respond


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "stub",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _stream_chunks(reply: Reply) -> list[dict[str, Any]]:
    chunks = [_chunk({"role": "assistant"})]
    if reply.content:
        half = len(reply.content) // 2
        chunks += [_chunk({"content": reply.content[:half]}), _chunk({"content": reply.content[half:]})]
    for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
        step = reply.split or max(len(arguments), 1)
        pieces = [arguments[i:i + step] for i in range(0, len(arguments), step)] or [""]
        first = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": pieces[0]}}
        chunks.append(_chunk({"tool_calls": [first]}))
        chunks += [_chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in pieces[1:]]
    chunks.append(_chunk({}, reply.finish or ("tool_calls" if reply.tool_calls else "stop")))
    if reply.usage is not None:
        chunks.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "stub",
                       "choices": [], "usage": reply.usage})
    return chunks


def _completion(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, n, a in reply.tool_calls]
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "stub",
                            "choices": [{"index": 0, "message": message,
                                         "finish_reason": "tool_calls" if reply.tool_calls else "stop"}]}
    if reply.usage is not None:
        body["usage"] = reply.usage
    return body


class ModelServer:
    """The server; use as a context manager. ``base_url`` ends in ``/v1``."""

    def __init__(self, responder: Callable[[dict[str, Any]], Any]) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.disconnects: list[float] = []
        self.stream_started = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                server.requests.append(body)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = server.responder(body)
                try:
                    server.answer(self, body, reply)
                except (BrokenPipeError, ConnectionResetError):
                    server.disconnects.append(time.monotonic())

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}/v1"

    def answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], reply: Any) -> None:
        if isinstance(reply, Status):
            payload = json.dumps({"error": {"message": reply.message, "type": "error", "code": None}}).encode()
            self._send(handler, reply.code, payload, "application/json", reply.headers)
        elif isinstance(reply, Raw):
            self._send(handler, 200, reply.body, reply.content_type, {})
        elif isinstance(reply, Slow):
            self._start_stream(handler)
            self.stream_started.set()
            for _ in range(reply.count):
                self._event(handler, _chunk({"content": "."}))
                time.sleep(reply.every)
        elif body.get("stream"):
            self._start_stream(handler)
            for chunk in _stream_chunks(reply):
                self._event(handler, chunk)
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()
        else:
            self._send(handler, 200, json.dumps(_completion(reply)).encode(), "application/json", {})

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, code: int, payload: bytes, kind: str, headers: dict[str, str]) -> None:
        handler.send_response(code)
        handler.send_header("content-type", kind)
        handler.send_header("content-length", str(len(payload)))
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(payload)

    @staticmethod
    def _start_stream(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.end_headers()

    @staticmethod
    def _event(handler: BaseHTTPRequestHandler, chunk: dict[str, Any]) -> None:
        handler.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        handler.wfile.flush()

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
