"""``glob``, ``list_dir`` and ``grep``: find things in the workspace without reading everything.

All three respect ``.gitignore`` (see :mod:`host_spec.host.workspace.ignore`), stay
inside the workspace, and cap what they return with a stated marker, so a search in
a large checkout never floods the model's context. They only read, so they are
safe to run in parallel with each other; they record nothing in the read ledger
(a match is not a read of the whole file).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from host_spec.workspace import WorkspaceCode, WorkspaceError

from host_spec.host.sandbox.policy import Policy
from host_spec.host.sandbox.service import Sandbox
from host_spec.host.workspace.config import WorkspaceConfig
from host_spec.host.workspace.content import load_text
from host_spec.host.workspace.files import workspace_of
from host_spec.host.workspace.ignore import Rules, children, translate, walk
from host_spec.host.workspace.paths import Workspace
from host_spec.host.workspace.schemas import GlobArgs, GrepArgs, ListArgs, ListResult

if TYPE_CHECKING:
    from host_spec.records import ToolCall

__all__ = ["SearchTools"]


@attrs.define(eq=False)
class SearchTools:
    config: WorkspaceConfig
    sandbox: Sandbox = attrs.Factory(Sandbox)

    def _policy(self, call: ToolCall) -> Policy:
        """The calling member's sandbox policy (the profile's own for a call without an agent)."""
        agent = call.agent
        return self.sandbox.policy_for(None) if agent is None else self.sandbox.policy_for(agent.name, agent.role)

    def _allowed(self, call: ToolCall, workspace: Workspace, path: str) -> Path:
        """``path`` resolved, unless it is the run's own data (``PATH_PROTECTED``)."""
        resolved = workspace.resolve(path)
        self.sandbox.guard(self._policy(call), workspace.root, resolved, path, write=False)
        return resolved

    def _visible(self, call: ToolCall, workspace: Workspace, rel: str) -> bool:
        """Whether a walked path may be shown (never the run's own data to a sandboxed member)."""
        return not (self._policy(call).sandboxed and self.sandbox.hides(workspace.root / rel, workspace.root))

    async def glob(self, args: GlobArgs, call: ToolCall) -> ListResult:
        workspace = workspace_of(call.agent)
        pattern = args.pattern.replace("\\", "/")
        if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
            raise WorkspaceError(f"pattern {args.pattern} must stay inside the workspace",
                                 code=WorkspaceCode.PATH_OUTSIDE_WORKSPACE)
        regex = re.compile(translate(pattern.removeprefix("./")) + r"\Z")

        def find() -> list[str]:
            return [rel for rel, is_dir in walk(workspace.root)
                    if not is_dir and regex.match(rel) and self._visible(call, workspace, rel)]

        return self._capped(sorted(await asyncio.to_thread(find)), "paths")

    async def list_dir(self, args: ListArgs, call: ToolCall) -> ListResult:
        workspace = workspace_of(call.agent)
        resolved = self._allowed(call, workspace, args.path)
        if not resolved.exists():
            raise WorkspaceError(f"{args.path} does not exist", code=WorkspaceCode.FILE_NOT_FOUND, path=args.path)
        if not resolved.is_dir():
            raise WorkspaceError(f"{args.path} is not a directory", code=WorkspaceCode.NOT_A_DIRECTORY, path=args.path)
        rel_dir = "" if resolved == workspace.root else workspace.relative(resolved)

        def entries() -> list[str]:
            kept = children(workspace.root, rel_dir, Rules.for_directory(workspace.root, rel_dir))
            return [rel.rsplit("/", 1)[-1] + ("/" if is_dir else "") for rel, is_dir in kept
                    if self._visible(call, workspace, rel)]

        return self._capped(await asyncio.to_thread(entries), "entries")

    async def grep(self, args: GrepArgs, call: ToolCall) -> ListResult:
        workspace = workspace_of(call.agent)
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            raise WorkspaceError(f"invalid regular expression: {exc}", code=WorkspaceCode.INVALID_PATTERN) from None
        resolved = self._allowed(call, workspace, args.path)
        if not resolved.exists():
            raise WorkspaceError(f"{args.path} does not exist", code=WorkspaceCode.FILE_NOT_FOUND, path=args.path)
        return await asyncio.to_thread(self._grep, call, workspace, resolved, regex)

    def _grep(self, call: ToolCall, workspace: Workspace, resolved: Path, regex: re.Pattern[str]) -> ListResult:
        limit, cut = self.config.max_matches, self.config.max_line_chars
        if resolved.is_dir():
            rel_dir = "" if resolved == workspace.root else workspace.relative(resolved)
            files = [rel for rel, is_dir in walk(workspace.root, rel_dir)
                     if not is_dir and self._visible(call, workspace, rel)]
        else:
            files = [workspace.relative(resolved)]
        matches: list[str] = []
        more = 0
        for rel in files:
            try:
                text = load_text(workspace.root / rel, rel, max_bytes=self.config.max_file_bytes).text
            except WorkspaceError:
                continue  # binaries, huge and non-UTF-8 files are not searched
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    if len(matches) < limit:
                        shown = line if len(line) <= cut else line[:cut] + " [line cut]"
                        matches.append(f"{rel}:{number}: {shown}")
                    else:
                        more += 1
        note = f"{more} more matches not shown; narrow the pattern or the path" if more else None
        return ListResult(items=tuple(matches), truncated=note)

    def _capped(self, items: list[str], what: str) -> ListResult:
        limit = self.config.max_matches
        if len(items) <= limit:
            return ListResult(items=tuple(items))
        return ListResult(items=tuple(items[:limit]), truncated=f"{len(items) - limit} more {what} not shown")
