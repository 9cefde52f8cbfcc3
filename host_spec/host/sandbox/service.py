"""The host's sandbox: the one object every command a member starts goes through.

The ``bash`` tool, the contract's :class:`~host_spec.workspace.CommandRunner` (a
Team's task checks and ``gates.on_complete``), stdio MCP servers and the file
tools all ask it: :meth:`Sandbox.policy_for` names a member's policy,
:meth:`Sandbox.prepare` turns a command line into the sandboxed one (with its
environment and limits), :meth:`Sandbox.guard` refuses a file tool's path the
policy protects. The writable root is whatever directory the caller runs the
command in -- the member's workspace root as the host resolves it for that member
(:func:`host_spec.host.workspace.files.workspace_of`) -- so a workspace that is
its own git worktree needs no change here.

The host builds one per run from the profile's ``[sandbox]`` table and the run's
data location (:meth:`Sandbox.for_run`), checks it at start (:meth:`Sandbox.check`:
``SANDBOX_UNAVAILABLE``, never a silent fallback) and provides it as a service.
"""

from __future__ import annotations

import functools
import os
import pwd
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

import attrs

from host_spec.errors import DshError
from host_spec.workspace import WorkspaceCode, WorkspaceError

from host_spec.host.sandbox.bwrap import Layout, bwrap_argv
from host_spec.host.sandbox.limits import CommandGroup, limited
from host_spec.host.sandbox.policy import Policy, SandboxSettings, looks_secret
from host_spec.host.sandbox.probe import Availability, probe

__all__ = ["Sandbox", "SandboxUnavailable", "Prepared", "host_environment", "SANDBOX_UNAVAILABLE"]

SANDBOX_UNAVAILABLE: Final = "SANDBOX_UNAVAILABLE"
#: Variables every sandboxed command gets from the host's environment (when set), besides ``LC_*``.
_ALLOWED: Final = ("PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "COLORTERM", "NO_COLOR")
#: Where PostgreSQL puts its socket when the URL names none.
_DEFAULT_SOCKET_DIRS: Final = ("/run/postgresql", "/var/run/postgresql")


class SandboxUnavailable(DshError):
    """A policy needs a sandbox this machine cannot make; the run does not start."""

    code = SANDBOX_UNAVAILABLE


def host_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without credentials and model keys (what an unsandboxed, ``full`` command gets)."""
    return {name: value for name, value in environ.items() if not looks_secret(name)}


@attrs.define(eq=False)
class Prepared:
    """One command ready to start: its argv and environment, and what to release after it ended."""

    argv: list[str]
    env: dict[str, str]
    group: CommandGroup | None = None

    async def release(self) -> None:
        if self.group is not None:
            await self.group.release()


def _store_paths(location: str | os.PathLike[str] | None) -> tuple[Path, ...]:
    """What of the run's own storage a member must not reach: the data dir, or a store's socket dirs."""
    if location is None:
        return ()
    text = os.fspath(location)
    if "://" not in text:
        return (Path(os.path.realpath(text)),)
    try:
        parts = urlsplit(text)
    except ValueError:  # malformed: the store refuses it (STORE_INVALID) right after, before anything runs
        return ()
    hosts = [value for values in parse_qs(parts.query).get("host", []) for value in values.split(",")]
    netloc_host = unquote(parts.netloc.rsplit("@", 1)[-1].split(":", 1)[0])
    hosts.append(netloc_host)
    dirs = [h for h in hosts if h.startswith("/")] or ([] if netloc_host else list(_DEFAULT_SOCKET_DIRS))
    return tuple(dict.fromkeys(Path(os.path.realpath(d)) for d in dirs if os.path.realpath(d) != "/tmp"))


@attrs.define(eq=False)
class Sandbox:
    """The run's sandbox (see the module docstring).

    Attributes:
        settings: The profile's ``[sandbox]`` table.
        hidden: Paths no sandboxed command may read or write (the run's data dir, store sockets).
    """

    settings: SandboxSettings = attrs.Factory(SandboxSettings)
    hidden: tuple[Path, ...] = ()

    @classmethod
    def for_run(cls, settings: SandboxSettings, location: str | os.PathLike[str] | None) -> Sandbox:
        """The sandbox of a run whose sessions live at ``location`` (a data dir, a store URL, ``None``)."""
        return cls(settings, _store_paths(location))

    # ------------------------------------------------------------ availability

    def _available(self, policy: Policy | None = None) -> Availability:
        found = probe()
        if found.bwrap is None:
            raise SandboxUnavailable(f"the sandbox policy needs bubblewrap, which cannot run here: {found.problem}. "
                                     "To run members without a sandbox instead, set [sandbox] policy = \"full\" "
                                     "in the profile")
        limit = self.settings.max_processes if policy is None else policy.max_processes
        if found.root and limit and found.cgroups is None:
            raise SandboxUnavailable(
                "the host runs as root, where the kernel does not enforce a process limit (RLIMIT_NPROC), and no "
                "writable pids cgroup was found for one; run dsh as an ordinary user, or set [sandbox] "
                "max_processes = 0 to go without a process limit")
        return found

    def check(self) -> None:
        """Fail now when some member's policy needs a sandbox this machine cannot make.

        Raises:
            SandboxUnavailable: no bubblewrap, no user namespaces, not Linux, or a process
                limit that cannot be enforced -- the message says how to fix it.
        """
        if self.settings.needs_sandbox():
            self._available()

    # ------------------------------------------------------------ policies

    def policy_for(self, member: str | None, role: str | None = None) -> Policy:
        """The policy of ``member``'s commands, spawned with ``role`` (``None``: the profile's own; no role)."""
        return self.settings.policy_for(member, role)

    def header(self) -> str:
        """One line for the run's header: the policy, the network, and who runs unsandboxed."""
        settings = self.settings
        line = f"sandbox: {settings.policy}"
        if settings.policy != "full":
            line += f" (bubblewrap, network {'on' if settings.network else 'off'})"
        overrides = [f"{p}={o.policy}" for p, o in settings.overrides().items() if o.policy is not None]
        if overrides:
            line += f"; members: {', '.join(overrides)}"
        unsandboxed = settings.unsandboxed()
        if unsandboxed:
            line += f"; UNSANDBOXED: {', '.join(unsandboxed)}"
        return line

    # ------------------------------------------------------------ commands

    def environment(self, policy: Policy, home: str) -> dict[str, str]:
        """The allowlisted environment of a sandboxed command (``HOME`` the emptied home, ``TMPDIR`` its ``/tmp``)."""
        environ = os.environ
        names = [n for n in environ if n in _ALLOWED or n.startswith("LC_") or n in policy.env]
        env = {name: environ[name] for name in names if not looks_secret(name)}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env["HOME"] = home
        env["TMPDIR"] = "/tmp"
        return env

    def prepare(
        self, policy: Policy, root: str, argv: Sequence[str], env: Mapping[str, str] | None = None,
        shown: Sequence[str] = (),
    ) -> Prepared:
        """``argv`` as started in ``root`` under ``policy``.

        Args:
            policy: The member's policy.
            root: The working directory and (``workspace-write``) the writable root.
            argv: The command line.
            env: Extra variables the caller sets on purpose (an MCP server's configured ``env``).
            shown: Files the user's configuration names for this command (an MCP server's
                script), made visible read-only wherever they are; directories are not.

        Raises:
            SandboxUnavailable: the policy needs a sandbox and none can be made.
        """
        extra = dict(env or {})
        if not policy.sandboxed:
            return Prepared(list(argv), {**host_environment(os.environ), **extra})
        found = self._available(policy)
        assert found.bwrap is not None
        home = os.path.expanduser("~")
        homes = {Path(os.path.realpath(home))}
        try:
            homes.add(Path(os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)))
        except KeyError:
            pass
        layout = Layout(root=Path(os.path.realpath(root)), homes=tuple(sorted(homes)), hidden=self.hidden,
                        tools=toolchains(tuple(sorted(homes)), os.environ.get("PATH", "")),
                        temp_tools=temp_interpreters(),
                        shown=tuple(Path(os.path.realpath(p)) for p in shown if os.path.isfile(p)))
        # As root the kernel never enforces RLIMIT_NPROC, so the pids cgroup is the process limit and
        # ``ulimit -u`` would only cost the command its time (it doubles the cgroup's cost on a start).
        by_cgroup = found.root and policy.max_processes and found.cgroups is not None
        inner = limited(argv, policy.memory_mb, 0 if by_cgroup else policy.max_processes)
        command = bwrap_argv(found.bwrap, policy, layout, inner)
        group = None
        if by_cgroup:
            assert found.cgroups is not None
            group = found.cgroups.group(policy.max_processes)
            command = group.wrap(command)
        return Prepared(command, {**self.environment(policy, home), **extra}, group)

    # ------------------------------------------------------------ file tools

    def guard(self, policy: Policy, root: Path, resolved: Path, shown: str, *, write: bool) -> None:
        """Refuse a file tool's access to ``resolved`` (inside ``root``) that ``policy`` does not allow.

        Raises:
            WorkspaceError: ``PATH_PROTECTED`` for the run's own data (read or write), a
                protected path (write), or any write under ``read-only``.
        """
        if not policy.sandboxed:
            return
        if self.hides(resolved, root):
            raise WorkspaceError(f"{shown} is the run's own data; no member may read or write it",
                                 code=WorkspaceCode.PATH_PROTECTED, path=shown)
        if not write:
            return
        if not policy.writes_workspace:
            raise WorkspaceError(f"the read-only sandbox policy refuses every write ({shown})",
                                 code=WorkspaceCode.PATH_PROTECTED, path=shown)
        for rel in policy.protected:
            for protected in {root / rel, Path(os.path.realpath(root / rel))}:
                if resolved == protected or protected in resolved.parents:
                    raise WorkspaceError(f"{shown} is protected ({rel} is read-only for members)",
                                         code=WorkspaceCode.PATH_PROTECTED, path=shown)

    def hides(self, resolved: Path, root: Path) -> bool:
        """Whether ``resolved`` is (inside) the run's own data, seen from the workspace ``root``.

        A data dir that holds the workspace hides everything but the workspace.
        """
        if resolved == root or root in resolved.parents:
            return any(_within(resolved, hidden) and not _within(root, hidden) for hidden in self.hidden)
        return any(_within(resolved, hidden) for hidden in self.hidden)


#: First-level entries of a home never shown whole, even when a toolchain lives inside (only that exact directory).
_PRIVATE: Final = frozenset({".ssh", ".aws", ".azure", ".gnupg", ".config", ".local", ".docker", ".kube",
                             ".password-store", ".netrc", ".pgpass", ".git-credentials", ".gcloud", ".terraform.d"})


@functools.lru_cache(maxsize=8)
def toolchains(homes: tuple[Path, ...], path: str) -> tuple[Path, ...]:
    """The toolchain directories inside ``homes`` a command needs to find its programs.

    Each ``PATH`` entry and the host's own Python installation (``sys.prefix``,
    ``sys.base_prefix``: a project venv's interpreter often lives in ``~/.pyenv``)
    that lies in a home is shown: its whole top-level directory (``~/.pyenv``,
    ``~/.cargo``: shims need their siblings) when that is a dot-directory holding no
    credentials, else the exact directory (``~/.local/bin``, ``~/bin``).
    """
    found: list[Path] = []
    for entry in (*path.split(os.pathsep), sys.prefix, sys.base_prefix):
        if not entry or not os.path.isabs(entry):
            continue
        real = Path(os.path.realpath(entry))
        for home in homes:
            if home not in real.parents:
                continue
            first = real.relative_to(home).parts[0]
            chosen = home / first if first.startswith(".") and first not in _PRIVATE else real
            if chosen not in found:
                found.append(chosen)
    return tuple(found)


@functools.lru_cache(maxsize=1)
def temp_interpreters() -> tuple[Path, ...]:
    """The host's own Python installation where it lies under ``/tmp`` (a venv made there).

    The sandbox's ``/tmp`` is private and empty, which would hide the very interpreter
    a member's ``python`` (or a stdio MCP server started with ``sys.executable``) needs:
    it is shown again, read-only.
    """
    temp = Path("/tmp")
    found: list[Path] = []
    for prefix in (sys.prefix, sys.base_prefix):
        real = Path(os.path.realpath(prefix))
        if temp in real.parents and real not in found:
            found.append(real)
    return tuple(found)


def _within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def sandbox_of(host: Any) -> Sandbox:
    """The host's :class:`Sandbox` service, or a default one (a tool object built without a host)."""
    found = None if host is None else host.find_service(Sandbox)
    return found if found is not None else Sandbox()
