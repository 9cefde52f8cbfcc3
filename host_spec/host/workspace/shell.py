"""``bash``: run a command in the workspace, in its own process group, bounded in time and output.

Why a process group: a command may start children (``make``, a test runner, a
server with ``&``). Killing only ``bash`` would leave them running, holding the
output pipe and the checkout. The command therefore starts a new session
(``setsid``), and a timeout, an interrupt (``interrupt_agent``), a cancelled turn
or the command's own end kills the *whole group* with SIGKILL: when the tool
returns, nothing it started is left behind. (A process that leaves the group on
purpose with its own ``setsid`` is out of reach; the output reader stops waiting
for it after a short grace.)

Output (stdout and stderr interleaved) is capped: the head and the tail are
kept, the middle is replaced by a marker naming how many bytes were dropped, and
``output_bytes`` states the full size. The environment is the host's minus
anything that looks like a credential (model API keys, tokens, secrets): a
command the model writes must not be able to print them into the log.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

import attrs

from host_spec.workspace import WorkspaceCode, WorkspaceError

from host_spec.host.workspace.config import WorkspaceConfig
from host_spec.host.workspace.files import workspace_of
from host_spec.host.workspace.schemas import BashArgs, BashResult

if TYPE_CHECKING:
    from host_spec.records import ToolCall

__all__ = ["ShellTool", "Capture", "clean_environment", "kill_group"]

_SECRET_MARKS: Final = ("API_KEY", "APIKEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "ACCESS_KEY", "PRIVATE_KEY",
                        "CREDENTIAL")
_SECRET_PREFIXES: Final = ("OPENAI_", "ANTHROPIC_", "AZURE_OPENAI", "GEMINI_", "GOOGLE_API", "MISTRAL_", "GROQ_",
                           "COHERE_", "DEEPSEEK_", "OPENROUTER_", "TOGETHER_", "HF_", "HUGGING")
#: How long the reader may wait for the pipe to close after the group was killed.
_DRAIN_GRACE_S: Final = 2.0
_CHUNK: Final = 65536


def clean_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without variables whose name marks a credential or a model provider."""
    kept = {}
    for name, value in environ.items():
        upper = name.upper()
        if any(mark in upper for mark in _SECRET_MARKS) or upper.startswith(_SECRET_PREFIXES):
            continue
        kept[name] = value
    return kept


def kill_group(pgid: int) -> None:
    """SIGKILL every process of group ``pgid`` (gone already is fine)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@attrs.define(eq=False)
class Capture:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts all of them."""

    limit: int
    head: bytearray = attrs.Factory(bytearray)
    tail: bytearray = attrs.Factory(bytearray)
    total: int = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        half = self.limit // 2
        room = half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.limit - half:
                del self.tail[: len(self.tail) - (self.limit - half)]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        dropped = self.total - len(self.head) - len(self.tail)
        marker = f"\n[... {dropped} bytes of output omitted ...]\n".encode()
        return (bytes(self.head) + marker + bytes(self.tail)).decode("utf-8", errors="replace")

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_CHUNK):
            self.feed(chunk)


@attrs.define(eq=False)
class ShellTool:
    config: WorkspaceConfig
    #: Process group ids of commands running now (tests check they are gone afterwards).
    running: set[int] = attrs.Factory(set)

    async def run(self, args: BashArgs, call: ToolCall) -> BashResult:
        workspace = workspace_of(call.agent)
        timeout_ms = args.timeout_ms if args.timeout_ms is not None else self.config.bash_timeout_ms
        if timeout_ms > self.config.bash_max_timeout_ms:
            raise WorkspaceError(f"timeout_ms {timeout_ms} exceeds the maximum {self.config.bash_max_timeout_ms}",
                                 code=WorkspaceCode.INVALID_ARGUMENT)
        if not args.command.strip():
            raise WorkspaceError("command must not be empty", code=WorkspaceCode.INVALID_ARGUMENT)
        process = await asyncio.create_subprocess_exec(
            "/bin/bash", "-c", args.command, cwd=workspace.root, env=clean_environment(os.environ),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        pgid = process.pid  # a new session: the group id is bash's pid
        self.running.add(pgid)
        capture = Capture(self.config.bash_output_bytes)
        assert process.stdout is not None
        reader = asyncio.ensure_future(capture.drain(process.stdout))
        interrupted = asyncio.Event()
        remove = call.signal.on_abort(lambda reason: interrupted.set())
        waiter = asyncio.ensure_future(process.wait())
        stopper = asyncio.ensure_future(interrupted.wait())
        try:
            await asyncio.wait({waiter, stopper}, timeout=timeout_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
        finally:
            remove()
            stopper.cancel()
            kill_group(pgid)  # timeout, interrupt, cancellation -- and leftovers of a finished command
            finished = waiter.done()
            if not finished:
                waiter.cancel()
                await asyncio.shield(process.wait())
            try:
                await asyncio.wait_for(asyncio.shield(reader), _DRAIN_GRACE_S)
            except asyncio.TimeoutError:
                reader.cancel()
            self.running.discard(pgid)
        output = capture.text()
        if not finished:
            if interrupted.is_set():
                raise WorkspaceError(f"command interrupted; output so far:\n{output}",
                                     code=WorkspaceCode.BASH_INTERRUPTED)
            raise WorkspaceError(f"command timed out after {timeout_ms} ms and was killed; output so far:\n{output}",
                                 code=WorkspaceCode.BASH_TIMEOUT)
        code = process.returncode if process.returncode is not None else -1
        return BashResult(exit_code=code, output=output, output_bytes=capture.total, truncated=capture.truncated)
