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
``output_bytes`` states the full size.

Every command runs in the host's sandbox (:mod:`host_spec.host.sandbox`) under the
calling member's policy, with the workspace root as its writable root: a fresh
pid namespace (killing bubblewrap, the group's leader, takes every process of the
sandbox with it), an allowlisted environment and an empty home. Under the
``full`` policy it runs unsandboxed with the host's environment minus anything
that looks like a credential (model API keys, tokens, secrets): a command the
model writes must not be able to print them into the log.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from typing import TYPE_CHECKING, Any, Final

import attrs
from msgspec import UnsetType

from host_spec.workspace import CommandOutcome, WorkspaceCode, WorkspaceError

from host_spec.host.sandbox.service import Sandbox
from host_spec.host.workspace.config import WorkspaceConfig
from host_spec.host.workspace.files import workspace_of
from host_spec.host.workspace.schemas import BashArgs, BashResult

if TYPE_CHECKING:
    from host_spec.records import AbortSignal, ToolCall

__all__ = ["ShellTool", "Capture", "kill_group"]

#: How long the reader may wait for the pipe to close after the group was killed.
_DRAIN_GRACE_S: Final = 2.0
_CHUNK: Final = 65536


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



class _Child:
    """A running command watched without threads: a pidfd for its exit, the pipe for its output.

    asyncio's own subprocess transport reports the exit only once the output pipe
    is closed, which a background grandchild can keep open for ever; watching the
    pid directly lets the tool notice that bash ended and kill what it left.
    """

    def __init__(self, process: subprocess.Popen[bytes], capture: Capture) -> None:
        loop = asyncio.get_running_loop()
        self.process = process
        self.loop = loop
        self.exited: asyncio.Future[None] = loop.create_future()
        self.eof: asyncio.Future[None] = loop.create_future()
        assert process.stdout is not None
        self.pipe = process.stdout.fileno()
        os.set_blocking(self.pipe, False)
        self.capture = capture
        loop.add_reader(self.pipe, self._readable)
        self.pidfd = os.pidfd_open(process.pid)
        loop.add_reader(self.pidfd, self._exited)

    def _readable(self) -> None:
        try:
            chunk = os.read(self.pipe, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self.capture.feed(chunk)
            return
        self.loop.remove_reader(self.pipe)
        if not self.eof.done():
            self.eof.set_result(None)

    def _exited(self) -> None:
        self.loop.remove_reader(self.pidfd)
        if not self.exited.done():
            self.exited.set_result(None)

    async def settle(self) -> int:
        """After the group was killed: reap bash, give the pipe a short grace, release everything."""
        try:
            await asyncio.wait_for(asyncio.shield(self.exited), _DRAIN_GRACE_S * 5)
            await asyncio.wait_for(asyncio.shield(self.eof), _DRAIN_GRACE_S)
        except asyncio.TimeoutError:
            pass
        finally:
            self.loop.remove_reader(self.pidfd)
            self.loop.remove_reader(self.pipe)
            os.close(self.pidfd)
            assert self.process.stdout is not None
            self.process.stdout.close()
        return self.process.wait()


@attrs.define(eq=False)
class ShellTool:
    """The ``bash`` tool, and the workspace's :class:`~host_spec.workspace.CommandRunner` (same rules)."""

    config: WorkspaceConfig
    sandbox: Sandbox = attrs.Factory(Sandbox)
    #: Process group ids of commands running now (tests check they are gone afterwards).
    running: set[int] = attrs.Factory(set)

    def _timeout(self, timeout_ms: int) -> int:
        if timeout_ms > self.config.bash_max_timeout_ms:
            raise WorkspaceError(f"timeout_ms {timeout_ms} exceeds the maximum {self.config.bash_max_timeout_ms}",
                                 code=WorkspaceCode.INVALID_ARGUMENT)
        return timeout_ms

    async def run(self, args: BashArgs, call: ToolCall) -> BashResult:
        workspace = workspace_of(call.agent)
        timeout_ms = self.config.bash_timeout_ms if isinstance(args.timeout_ms, UnsetType) else args.timeout_ms
        member, role = (None, None) if call.agent is None else (call.agent.name, call.agent.role)
        outcome = await self.run_command(str(workspace.root), args.command, timeout_ms=timeout_ms, signal=call.signal,
                                         member=member, role=role)
        if outcome.interrupted:
            raise WorkspaceError(f"command interrupted; output so far:\n{outcome.output}",
                                 code=WorkspaceCode.BASH_INTERRUPTED)
        if outcome.timed_out:
            raise WorkspaceError(
                f"command timed out after {timeout_ms} ms and was killed; output so far:\n{outcome.output}",
                code=WorkspaceCode.BASH_TIMEOUT)
        assert outcome.exit_code is not None
        return BashResult(exit_code=outcome.exit_code, output=outcome.output, output_bytes=outcome.output_bytes,
                          truncated=outcome.truncated)

    async def run_command(
        self, root: str, command: str, *, timeout_ms: int, signal: AbortSignal | None = None,
        member: str | None = None,
        role: str | None = None,
    ) -> CommandOutcome:
        """Run ``command`` in ``root`` under the sandbox policy of ``member`` (spawned with ``role``): its own
        process group, bounded in time and output (see the module)."""
        self._timeout(timeout_ms)
        if not command.strip():
            raise WorkspaceError("command must not be empty", code=WorkspaceCode.INVALID_ARGUMENT)
        if not os.path.isdir(root):
            raise WorkspaceError(f"workspace {root} is not a directory", code=WorkspaceCode.NO_WORKSPACE)
        prepared = self.sandbox.prepare(self.sandbox.policy_for(member, role), root, ["/bin/bash", "-c", command])
        try:
            process = subprocess.Popen(
                prepared.argv, cwd=root, env=prepared.env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            )
        except BaseException:
            await prepared.release()
            raise
        pgid = process.pid  # a new session: the group id is bash's pid
        self.running.add(pgid)
        capture = Capture(self.config.bash_output_bytes)
        child = _Child(process, capture)
        interrupted = asyncio.Event()
        remove = signal.on_abort(lambda reason: interrupted.set()) if signal is not None else (lambda: None)
        stopper = asyncio.ensure_future(interrupted.wait())
        try:
            waits: set[asyncio.Future[Any]] = {child.exited, stopper}
            await asyncio.wait(waits, timeout=timeout_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
        finally:
            remove()
            stopper.cancel()
            finished = child.exited.done()
            kill_group(pgid)  # timeout, interrupt, cancellation -- and leftovers of a finished command
            code = await child.settle()
            self.running.discard(pgid)
            await prepared.release()
        output = capture.text()
        if not finished:
            stopped = interrupted.is_set()
            return CommandOutcome(exit_code=None, output=output, output_bytes=capture.total,
                                  truncated=capture.truncated, timed_out=not stopped, interrupted=stopped)
        return CommandOutcome(exit_code=code, output=output, output_bytes=capture.total, truncated=capture.truncated)
