"""MCP1: the size of an MCP server's model-facing surface, paid on every model step of every member.

The example glossary server (``examples/mcp_server.py``) is started for real over
stdio through the ``mcp`` plugin's hub, and its tools are measured as a model
receives them: ``{name, description, parameters}`` per tool, serialized compactly,
the ``parameters`` being exactly what the host sends (:func:`~host_spec.host.models.adapter.tool_schema`), plus the
``mcp:instructions`` prompt section the server's ``instructions`` become. Kept apart
from M1 (the Team surface) and W1 (the workspace tools): a profile's servers add
to every step, and this line says by how much. Goal: at most 600 bytes for the
example's two tools (a server's own descriptions are its author's; the figure
is there to be seen next to M1 and W1, not to grade a third party).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import report  # noqa: E402
from host_spec.host.models.adapter import tool_schema  # noqa: E402
from host_spec.host.mcp.config import load_config  # noqa: E402
from host_spec.host.mcp.hub import Hub  # noqa: E402
from host_spec.host.mcp.plugin import McpTools  # noqa: E402
from host_spec.schema import compact_json  # noqa: E402

SERVER = Path(__file__).resolve().parent.parent / "examples" / "mcp_server.py"
MCP_BUDGET = 600


async def _surface() -> tuple[int, int]:
    config = load_config({"servers": {"glossary": {"command": sys.executable, "args": [str(SERVER)]}}})
    hub = Hub(config.servers)
    await asyncio.to_thread(hub.start)
    try:
        failure = hub.connections["glossary"].failure
        if failure is not None:
            raise RuntimeError(f"the example MCP server did not start: {failure}")
        installed = McpTools(None, hub)  # type: ignore[arg-type]  # the host is only needed to run them
        tools = [{"name": s.name, "description": s.description, "parameters": tool_schema(s)} for s in installed.specs]
        return len(compact_json(tools).encode()) + len(installed.instructions.encode()), len(tools)
    finally:
        await hub.close()


def run() -> list[tuple[str, float, float]]:
    size, count = asyncio.run(_surface())
    print(f"surface: {count} MCP tool schemas + instructions of the example glossary server {size} B "
          f"(budget {MCP_BUDGET} B)")
    return [("MCP1", size, MCP_BUDGET)]


if __name__ == "__main__":
    for bench_id, value, goal in run():
        report(bench_id, value, goal)
