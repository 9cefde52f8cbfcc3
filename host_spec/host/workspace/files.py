"""``read_file``, ``write_file`` and ``edit_file``: exact stale-version rejection.

The guard: an agent may replace an existing file only when the version it last
read (or wrote) -- as recorded in its own session log -- is the file's current
version, compared by sha256. Anything else wrote in between (a teammate, a
formatter run through ``bash``, the user's editor) and the write is refused with
``FILE_STALE`` and a short diff of what changed since the agent's read, and
nothing is written. Creating a file that does not exist needs no read.

Check and write of one path happen under one per-path lock, so two members of
one process cannot both pass the check against the same version; the write
itself is atomic (temp file, fsync, rename, directory fsync). The lock is
per-process: another process writing the checkout is caught by the digest
comparison of its next write, like any external edit.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import attrs
from msgspec import UNSET, UnsetType

from host_spec.workspace import (
    WORKSPACE_READ,
    WORKSPACE_WRITE,
    FileRead,
    FileWrite,
    WorkspaceCode,
    WorkspaceError,
    WriteAudit,
    WriteAuditor,
)

from host_spec.host.sandbox.service import Sandbox
from host_spec.host.workspace.config import WorkspaceConfig
from host_spec.host.workspace.content import Text, atomic_write, digest, load_text, short_diff
from host_spec.host.workspace.ledger import Ledger, Ledgers
from host_spec.host.workspace.paths import Workspace
from host_spec.host.workspace.schemas import EditArgs, ReadArgs, ReadResult, WriteArgs, WriteResult

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host
    from host_spec.records import ToolCall

__all__ = ["FileTools", "PathLocks", "workspace_of"]

T = TypeVar("T")


def workspace_of(agent: Agent | None) -> Workspace:
    """The workspace of ``agent``: its session header's ``cwd`` (inherited by every child).

    Raises:
        WorkspaceError: ``NO_WORKSPACE`` for a call without an agent or a session without one.
    """
    cwd = None if agent is None else agent.session.header.cwd
    if cwd is None:
        raise WorkspaceError("this session has no workspace", code=WorkspaceCode.NO_WORKSPACE)
    return Workspace.at(cwd)


@attrs.define(eq=False)
class PathLocks:
    """One ``asyncio.Lock`` per resolved path, dropped again when nobody holds or awaits it."""

    locks: dict[Path, tuple[asyncio.Lock, int]] = attrs.Factory(dict)

    async def run(self, path: Path, body: Callable[[], Awaitable[T]]) -> T:
        """Await ``body()`` while holding ``path``'s lock."""
        lock, users = self.locks.get(path, (asyncio.Lock(), 0))
        self.locks[path] = (lock, users + 1)
        try:
            async with lock:
                return await body()
        finally:
            lock, users = self.locks[path]
            if users == 1:
                del self.locks[path]
            else:
                self.locks[path] = (lock, users - 1)


@attrs.define(eq=False)
class FileTools:
    """The three file tools of one host (they share its ledgers and locks)."""

    host: Host
    config: WorkspaceConfig
    ledgers: Ledgers
    sandbox: Sandbox = attrs.Factory(Sandbox)
    locks: PathLocks = attrs.Factory(PathLocks)

    # ------------------------------------------------------------ read_file

    async def read(self, args: ReadArgs, call: ToolCall) -> ReadResult:
        agent, workspace = _caller(call)
        resolved = self._allowed(agent, workspace, args.path, write=False)
        rel = workspace.relative(resolved)
        text = await asyncio.to_thread(load_text, resolved, args.path, max_bytes=self.config.max_file_bytes)
        agent.session.append(WORKSPACE_READ, FileRead(rel, text.sha256, self._snapshot(text.text, text.size)))
        return self._render(rel, text, args.offset, None if args.limit is UNSET else args.limit)

    def _render(self, rel: str, text: Text, offset: int, limit: int | None) -> ReadResult:
        config = self.config
        lines = text.text.splitlines()
        total = len(lines)
        wanted = limit if limit is not None else config.read_max_lines
        shown: list[str] = []
        size = 0
        end = offset - 1
        for number in range(offset, min(total, offset - 1 + wanted) + 1):
            line = lines[number - 1]
            if len(line) > config.max_line_chars:
                line = line[: config.max_line_chars] + " [line cut]"
            row = f"{number:>6}\t{line}"
            size += len(row.encode()) + 1
            if shown and size > config.read_max_bytes:
                break
            shown.append(row)
            end = number
        note = None
        if offset > total and total:
            note = f"offset {offset} is past the end ({total} lines)"
        elif end < total:
            note = f"showing lines {offset}-{end} of {total}; continue with offset={end + 1}"
        return ReadResult(path=rel, sha256=text.sha256, lines=total, content="\n".join(shown), note=note)

    def _snapshot(self, text: str, size: int) -> str | None:
        return text if size <= self.config.snapshot_max_bytes else None

    # ------------------------------------------------------------ write_file / edit_file

    async def write(self, args: WriteArgs, call: ToolCall) -> WriteResult:
        agent, workspace = _caller(call)
        resolved = self._allowed(agent, workspace, args.path, write=True)
        rel = workspace.relative(resolved)
        data = args.content.encode()
        self._check_size(args.path, len(data))

        async def body() -> WriteResult:
            current = await asyncio.to_thread(self._current, resolved, args.path)
            self._guard(agent, rel, current, _given(args.expected_sha256))
            return await self._commit(agent, call, resolved, rel, args.content, data, current, replaced=0)

        return await self.locks.run(resolved, body)

    async def edit(self, args: EditArgs, call: ToolCall) -> WriteResult:
        agent, workspace = _caller(call)
        resolved = self._allowed(agent, workspace, args.path, write=True)
        rel = workspace.relative(resolved)
        if not args.old_string:
            raise WorkspaceError("old_string must not be empty (use write_file to create a file)",
                                 code=WorkspaceCode.EMPTY_OLD_STRING)
        if args.old_string == args.new_string:
            raise WorkspaceError("old_string and new_string are identical", code=WorkspaceCode.EDIT_NO_CHANGE)

        async def body() -> WriteResult:
            current = await asyncio.to_thread(load_text, resolved, args.path, max_bytes=self.config.max_file_bytes)
            self._guard(agent, rel, current, _given(args.expected_sha256))
            count = current.text.count(args.old_string)
            _check_count(args.path, count, None if args.expected_count is UNSET else args.expected_count)
            text = current.text.replace(args.old_string, args.new_string)
            data = text.encode()
            self._check_size(args.path, len(data))
            return await self._commit(agent, call, resolved, rel, text, data, current, replaced=count)

        return await self.locks.run(resolved, body)

    def _allowed(self, agent: Agent, workspace: Workspace, path: str, *, write: bool) -> Path:
        """``path`` resolved inside the workspace, and allowed by the agent's sandbox policy (``PATH_PROTECTED``)."""
        resolved = workspace.resolve(path)
        self.sandbox.guard(self.sandbox.policy_for(agent.name, agent.role), workspace.root, resolved, path, write=write)
        return resolved

    def _current(self, resolved: Path, shown: str) -> Text | None:
        if not resolved.exists():
            return None
        return load_text(resolved, shown, max_bytes=self.config.max_file_bytes)

    def _check_size(self, shown: str, size: int) -> None:
        if size > self.config.max_file_bytes:
            raise WorkspaceError(f"new content of {shown} has {size} bytes; the limit is {self.config.max_file_bytes}",
                                 code=WorkspaceCode.FILE_TOO_LARGE, path=shown)

    def _guard(self, agent: Agent, rel: str, current: Text | None, expected: str | None) -> None:
        """Refuse unless ``agent`` has seen ``current`` (and it matches ``expected``, when given)."""
        if expected is not None and (current is None or current.sha256 != expected):
            now = "does not exist" if current is None else f"has sha256 {current.sha256}"
            raise WorkspaceError(f"{rel} {now}, not the expected {expected}; read it again",
                                 code=WorkspaceCode.FILE_STALE, path=rel)
        if current is None:
            return
        ledger: Ledger = self.ledgers.of(agent.session)
        seen = ledger.get(rel)
        if seen is None:
            raise WorkspaceError(f"read {rel} before changing it (you have not read this file)",
                                 code=WorkspaceCode.FILE_NOT_READ, path=rel)
        if seen.sha256 != current.sha256:
            if seen.snapshot is not None:
                diff = short_diff(seen.snapshot, current.text, max_lines=self.config.diff_max_lines)
            else:
                diff = "(the version you read was too large to keep; no diff)"
            raise WorkspaceError(
                f"{rel} changed since you read it (sha256 {seen.sha256[:12]} -> {current.sha256[:12]}); "
                f"nothing was written. Read it again, then redo your change. Changes since your read:\n{diff}",
                code=WorkspaceCode.FILE_STALE, path=rel,
            )

    async def _commit(
        self, agent: Agent, call: ToolCall, resolved: Path, rel: str, text: str, data: bytes,
        current: Text | None, *, replaced: int,
    ) -> WriteResult:
        audit = self._audit(agent, rel)
        await asyncio.to_thread(atomic_write, resolved, data)
        sha = digest(data)
        record = FileWrite(
            path=rel, tool=call.name, sha256=sha, previous_sha256=None if current is None else current.sha256,
            snapshot=self._snapshot(text, len(data)), audit=audit,
        )
        agent.session.append(WORKSPACE_WRITE, record)
        warnings = () if audit is None else audit.warnings
        return WriteResult(path=rel, sha256=sha, bytes=len(data), created=current is None, replaced=replaced,
                           warnings=warnings)

    def _audit(self, agent: Agent, rel: str) -> WriteAudit | None:
        auditor = self.host.find_service(WriteAuditor)
        return None if auditor is None else auditor.audit_write(agent, rel)


def _given(value: str | UnsetType) -> str | None:
    return None if isinstance(value, UnsetType) else value


def _caller(call: ToolCall) -> tuple[Agent, Workspace]:
    workspace = workspace_of(call.agent)
    assert call.agent is not None  # workspace_of refuses a call without an agent
    return call.agent, workspace


def _check_count(shown: str, count: int, expected: int | None) -> None:
    if count == 0:
        raise WorkspaceError(f"old_string does not occur in {shown}", code=WorkspaceCode.OLD_STRING_NOT_FOUND)
    if expected is None and count > 1:
        raise WorkspaceError(
            f"old_string occurs {count} times in {shown}; add context to make it unique, "
            f"or pass expected_count={count} to replace all", code=WorkspaceCode.OLD_STRING_AMBIGUOUS,
        )
    if expected is not None and count != expected:
        raise WorkspaceError(f"old_string occurs {count} times in {shown}, not {expected}",
                             code=WorkspaceCode.OLD_STRING_COUNT_MISMATCH)
