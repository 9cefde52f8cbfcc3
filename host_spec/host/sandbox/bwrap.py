"""The bubblewrap command line of one sandboxed command (a pure function of the policy and the layout).

Mount order is the design: later mounts cover earlier ones, so the list goes from
the widest to the narrowest rule.

1. ``/`` read-only; a fresh ``/dev`` and ``/proc`` (of the command's own pid
   namespace: the host's processes are not even visible, let alone killable).
2. A private, empty ``/tmp`` (but for the host's own Python installation when a venv
   under ``/tmp`` holds it, shown read-only) and an empty ``/run``: local service sockets live
   there (PostgreSQL's, D-Bus, a container engine's -- reaching that one would be
   root on the machine), network or not. With network, the resolver's files are
   bound back (``/etc/resolv.conf`` often points into ``/run``).
3. The user's home replaced by an empty directory, then the toolchains found in
   it (``PATH`` entries, the host's own Python) and the listed home paths bound
   read-only into it.
4. The workspace root bound writable (``workspace-write``) or read-only (it may lie
   under ``/tmp`` or the home, which step 2 and 3 emptied).
5. The protected paths inside it read-only again (``.git``, ``.dsh``, the profile's).
6. The hidden paths (the run's data dir, the store's socket directory) covered by an
   empty read-only tmpfs, or ``/dev/null`` for a file: neither readable nor writable.
   A data dir that holds the workspace (the demo keeps it in ``DATA/workspace``) is
   emptied *before* step 4, so only the workspace shows through it.

Every namespace is unshared (user where possible, pid, ipc, uts, cgroup, and the
network unless the policy allows it), every capability dropped, the command gets
its own session (no ``TIOCSTI`` into a terminal) and dies with its parent: a
crashed host leaves no sandbox behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

import attrs

from host_spec.host.sandbox.policy import Policy

__all__ = ["Layout", "bwrap_argv"]

#: What of ``/run`` a command with network needs to resolve names.
_RESOLVERS: Final = ("/run/systemd/resolve", "/run/resolvconf", "/run/NetworkManager")


@attrs.frozen
class Layout:
    """Where one command runs (every path absolute, symlinks resolved).

    Attributes:
        root: The member's workspace root (the working directory).
        homes: The user's home directories to empty (``$HOME`` and the account's own).
        hidden: Paths to cover (the run's data dir, the store's socket directory).
        tools: Toolchain directories inside a home shown read-only again (an interpreter
            under ``~/.pyenv``, ``~/.cargo/bin`` on ``PATH``).
        temp_tools: The host's own Python installation under ``/tmp`` (a venv made there),
            shown read-only again inside the private ``/tmp``.
        shown: Files the user's configuration names for this command (an MCP server's
            script), shown read-only wherever they are, even in an emptied ``/tmp`` or
            home; never over a hidden path.
    """

    root: Path
    homes: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    tools: tuple[Path, ...] = ()
    temp_tools: tuple[Path, ...] = ()
    shown: tuple[Path, ...] = ()


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _home(home: Path, policy: Policy, tools: Sequence[Path]) -> list[str]:
    out = ["--tmpfs", str(home)]
    for tool in tools:
        if home in tool.parents:
            out += ["--ro-bind-try", str(tool), str(tool)]
    for rel in policy.home_paths:
        out += ["--ro-bind-try", str(home / rel), str(home / rel)]
    return out


def bwrap_argv(bwrap: str, policy: Policy, layout: Layout, argv: Sequence[str]) -> list[str]:
    """The full command line running ``argv`` under ``policy`` (see the module docstring for the order).

    The environment is not on the command line (where any process could read it
    from ``/proc``): bubblewrap passes its own, already allowlisted, to the command.
    """
    root = layout.root
    out = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    if policy.network:
        out.append("--share-net")
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for tool in layout.temp_tools:  # the host's interpreter in a venv under /tmp
        out += ["--ro-bind-try", str(tool), str(tool)]
    if not _inside(root, Path("/run")):
        out += ["--tmpfs", "/run"]  # local service sockets: PostgreSQL's, D-Bus, a container engine's
        if policy.network:
            for resolver in _RESOLVERS:  # name resolution where /etc/resolv.conf points into /run
                out += ["--ro-bind-try", resolver, resolver]
    homes = [home for home in layout.homes if home not in (Path("/"), root)]  # a home that IS the workspace shows
    holding = [hidden for hidden in layout.hidden if _inside(root, hidden)]
    for home in homes:
        if not _inside(home, root):  # a home holding the workspace: emptied first, the workspace bound over it
            out += _home(home, policy, layout.tools)
    for hidden in holding:  # a data dir holding the workspace (the demo's layout): emptied, the workspace bound in
        out += ["--tmpfs", str(hidden)]
    out += ["--bind" if policy.writes_workspace else "--ro-bind", str(root), str(root)]
    if policy.writes_workspace:
        for rel in policy.protected:
            out += ["--ro-bind-try", str(root / rel), str(root / rel)]
    for home in homes:
        if _inside(home, root):  # a home inside the workspace: emptied after the workspace was bound
            out += _home(home, policy, layout.tools)
    for path in layout.shown:  # the files the configuration names (a server's script), read-only
        out += ["--ro-bind-try", str(path), str(path)]
    for hidden in layout.hidden:
        if hidden in holding:
            out += ["--remount-ro", str(hidden)]
        elif hidden.is_dir():
            out += ["--tmpfs", str(hidden), "--remount-ro", str(hidden)]
        elif hidden.exists():
            out += ["--ro-bind", "/dev/null", str(hidden)]
    out += ["--chdir", str(root), "--", *argv]
    return out
