"""Confinement: every path a tool touches resolves inside the workspace root.

A model names files relative to the workspace; ``..`` segments, absolute paths
and symlinks are all ways to leave it. The rule is checked on the *resolved*
path (every symlink followed, ``..`` collapsed), so a link inside the checkout
that points outside is refused exactly like ``../x``. A link that stays inside is
followed: the tools then act on its target, and the target's path is what the
read ledger records, so two names of one file share one version.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from host_spec.workspace import WorkspaceCode, WorkspaceError

__all__ = ["Workspace"]


@attrs.frozen
class Workspace:
    """One workspace root (absolute, symlinks resolved).

    Attributes:
        root: The resolved root directory.
    """

    root: Path

    @classmethod
    def at(cls, directory: str | os.PathLike[str]) -> Workspace:
        """The workspace rooted at ``directory``.

        Raises:
            WorkspaceError: ``NO_WORKSPACE`` when ``directory`` is not a directory.
        """
        root = Path(os.path.realpath(directory))
        if not root.is_dir():
            raise WorkspaceError(f"workspace {directory} is not a directory", code=WorkspaceCode.NO_WORKSPACE)
        return cls(root)

    def resolve(self, path: str) -> Path:
        """The resolved absolute path of ``path`` (relative to the root, or absolute inside it).

        Raises:
            WorkspaceError: ``INVALID_ARGUMENT`` for an empty path or a NUL byte,
                ``PATH_OUTSIDE_WORKSPACE`` when the resolved path leaves the root.
        """
        if not path or "\x00" in path:
            raise WorkspaceError("path must be a non-empty string without NUL bytes",
                                 code=WorkspaceCode.INVALID_ARGUMENT)
        joined = self.root / path  # an absolute ``path`` replaces the root, and is checked like any other
        resolved = Path(os.path.realpath(joined))
        if resolved != self.root and self.root not in resolved.parents:
            raise WorkspaceError(f"path {path} is outside the workspace", code=WorkspaceCode.PATH_OUTSIDE_WORKSPACE,
                                 path=path)
        return resolved

    def relative(self, resolved: Path) -> str:
        """``resolved`` (inside the root) as the ``/``-separated relative path the tools report (``.``: the root)."""
        return resolved.relative_to(self.root).as_posix()
