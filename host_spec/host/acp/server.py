"""``dsh acp`` running: the agent on standard input and output until the editor closes them.

Standard output carries the protocol and nothing else (logs go to stderr, as
everywhere in ``dsh``). When the editor closes the pipe, or sends SIGTERM, every
open session's host is closed as ``dsh chat``'s exit closes it: sessions flushed,
members' inboxes kept, so ``session/load`` (or ``dsh resume``) continues later.
A SIGKILL loses nothing accepted either: the log is written ahead.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

import acp

from host_spec.host.acp.agent import DshAgent
from host_spec.host.acp.session import AcpOptions

__all__ = ["serve"]


async def serve(options: AcpOptions, version: str) -> int:
    """Serve the editor on stdio; exit status 0 when it closed the connection."""
    agent = DshAgent(options, version)
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    loop.add_signal_handler(signal.SIGTERM, main.cancel)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await acp.run_agent(agent)  # type: ignore[arg-type]  # acp.Agent lists every optional method; the SDK answers method-not-found for those we leave out
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        await agent.close()
    return 0
