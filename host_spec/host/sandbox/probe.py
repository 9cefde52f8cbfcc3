"""Can this machine make a sandbox? Asked once per process, answered with how to fix it.

The probe runs a real bubblewrap with the options every sandboxed command uses
(all namespaces, no capabilities, ``/`` read-only) around ``/bin/true``: a
missing binary, user namespaces switched off (``kernel.unprivileged_userns_clone``,
an AppArmor restriction) or a container that forbids ``mount`` all fail there,
once, before any member runs -- never halfway through a run, and never by
silently running the command without a sandbox.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from typing import Final

import attrs

from host_spec.host.sandbox.limits import PidsCgroups, find_pids_cgroups

__all__ = ["Availability", "probe", "INSTALL_HINT"]

INSTALL_HINT: Final = "apt-get install bubblewrap"
_PROBE_TIMEOUT_S: Final = 20.0


@attrs.frozen
class Availability:
    """What the probe found.

    Attributes:
        bwrap: The bubblewrap binary, or ``None`` when no sandbox can be made.
        problem: Why not, with the fix (``None`` when it works).
        cgroups: Per-command pids cgroups (needed for a process limit as root), if writable.
        root: The host runs as root (``RLIMIT_NPROC`` is not enforced on it).
    """

    bwrap: str | None
    problem: str | None = None
    cgroups: PidsCgroups | None = None
    root: bool = False


@functools.cache
def probe() -> Availability:
    """The machine's answer, computed on first use and kept for the process's life."""
    root = os.geteuid() == 0
    if not sys.platform.startswith("linux"):
        return Availability(None, f"the sandbox needs Linux (bubblewrap); this is {sys.platform}")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Availability(None, f"bubblewrap (bwrap) is not installed; install it: {INSTALL_HINT}")
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL", "--ro-bind", "/", "/",
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", "/bin/true"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=_PROBE_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Availability(None, f"bubblewrap could not run: {exc}")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        return Availability(None, f"bubblewrap cannot create a sandbox here ({said[0]}); user namespaces may be "
                                  "disabled: sysctl kernel.unprivileged_userns_clone=1 (Debian) or allow them for "
                                  "bwrap (Ubuntu's AppArmor userns restriction)")
    return Availability(bwrap, cgroups=find_pids_cgroups() if root else None, root=root)
