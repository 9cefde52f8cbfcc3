"""A tiny MCP server for the MCP example team: a glossary of the words this project uses.

Written with the official MCP SDK (``pip install 'dsh-team[mcp]'``). It speaks
stdio by default, which is how ``examples/mcp_profile.toml`` starts it for every
run; ``--http PORT`` serves the same tools over streamable HTTP on 127.0.0.1
(endpoint ``http://127.0.0.1:PORT/mcp``)::

    python examples/mcp_server.py              # stdio
    python examples/mcp_server.py --http 8765  # streamable HTTP

Its two tools are read-only and deterministic, so a scripted team can rely on
their answers.
"""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

GLOSSARY = {
    "lease": "A member session has one holder at a time; a claim raises an epoch that every append carries.",
    "fencing token": "The epoch on every append: a holder presumed dead can never write again.",
    "quiescence": "No member runs and no mail is open: the Team is durably quiet.",
    "outcome unknown": "A tool call a crash cut short: it may have run, so it is never re-run silently.",
}

server = MCPServer("glossary", instructions="Definitions of dsh-team terms.")
READ_ONLY = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ_ONLY)
def define(term: str) -> str:
    """Define a dsh-team term (lease, fencing token, quiescence, outcome unknown)."""
    return GLOSSARY.get(term.strip().lower(), f"no entry for {term!r}; known: {', '.join(sorted(GLOSSARY))}")


@server.tool(annotations=READ_ONLY)
def count_words(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT")
    options = parser.parse_args()
    if options.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=options.http)


if __name__ == "__main__":
    main()
