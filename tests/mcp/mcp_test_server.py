"""A real MCP server (official SDK) the MCP client tests start over stdio or streamable HTTP.

Usage: ``python mcp_test_server.py [--http PORT | --sse PORT] [--fail-start]``. Tools:

* ``echo(text)``: returns the text (and ``DEMO_SUFFIX`` from its environment, so
  env expansion is visible);
* ``leak()``: fails with a message that quotes ``API_TOKEN`` (the client must scrub it);
* ``fail()``: a tool error (``isError``);
* ``refuse()``: a JSON-RPC error answer quoting ``API_TOKEN``;
* ``block(marker)``: writes its process id to ``marker`` and never answers (a call
  in flight when the test kills the server or the host);
* ``auth()``: the ``Authorization`` header the HTTP request carried;
* ``weird.name/tool``: a name the client must sanitise;
* ``chatter(lines)``: writes that many lines to stderr and answers (output about other work);
* ``die(reason)``: writes ``dying: REASON`` to stderr and exits at once (a server that dies in a call);
* ``where()``: ``{"cwd", "parent"}``: where the server runs, and the process that started it.

``--fail-start`` exits at once after printing the token to stderr: a server that
fails to start (its stderr tail is quoted in the error, scrubbed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("test", instructions=f"Call echo to echo; token {os.environ.get('API_TOKEN', '')}.")


@server.tool()
def echo(text: str) -> str:
    """Echo the text."""
    return text + os.environ.get("DEMO_SUFFIX", "")


@server.tool()
def leak() -> str:
    """Fail quoting the token."""
    raise ToolError(f"token {os.environ.get('API_TOKEN', '')} refused")


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ToolError("broken on purpose")


@server.tool()
def refuse() -> str:
    """Answers with a JSON-RPC error (not a tool result), quoting the token."""
    raise MCPError(-32602, f"refused with token {os.environ.get('API_TOKEN', '')}")


@server.tool()
async def block(marker: str) -> str:
    """Never answers."""
    Path(marker).write_text(str(os.getpid()))
    await asyncio.sleep(3600)
    return "unreachable"


@server.tool()
def auth(ctx: Context) -> str:
    """The Authorization header of this HTTP request (none over stdio)."""
    request = ctx.request_context.request
    return "" if request is None else request.headers.get("authorization", "")


@server.tool(name="weird.name/tool")
def weird() -> str:
    """A tool whose name needs sanitising."""
    return "ok"


@server.tool()
def chatter(lines: int) -> str:
    """Write lines to stderr, then answer."""
    for number in range(lines):
        print(f"earlier work line {number}", file=sys.stderr, flush=True)
    return "chatted"


@server.tool()
def die(reason: str) -> str:
    """Exit in the middle of the call."""
    print(f"dying: {reason}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # at once: no cleanup, no answer to the call
    return "unreachable"


@server.tool()
def where() -> str:
    """The server's working directory and parent process id, as JSON."""
    return json.dumps({"cwd": os.getcwd(), "parent": os.getppid()})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--sse", type=int)
    parser.add_argument("--fail-start", action="store_true")
    options = parser.parse_args()
    if options.fail_start:
        print(f"cannot start: bad token {os.environ.get('API_TOKEN', '')}", file=sys.stderr, flush=True)
        sys.exit(3)
    if options.sse is not None:
        server.run("sse", host="127.0.0.1", port=options.sse)
    elif options.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
