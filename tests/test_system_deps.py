"""The test suite's system dependencies: `.ci/system-deps`, which `make test` (and so CI) runs first.

Each case runs the real script in a subprocess against a fake file-system prefix (environment
variables name the browser, the PostgreSQL root, the server's user and the apt-get to use), so
both the "found" and the "missing" branches run on any machine without uninstalling anything.
The "install" branch uses a fake apt-get that records its arguments and creates what it was asked
for; it needs root, which CI has; elsewhere it runs as root of a user namespace (`unshare -r`).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / ".ci" / "system-deps"
HINT = "run: sudo apt-get install -y bubblewrap chromium postgresql"

FAKE_APT = """#!/bin/sh
echo "$DEBIAN_FRONTEND $*" >> "{log}"
case "$*" in *install*)
  case "$*" in *bubblewrap*) mkdir -p "$(dirname "{bwrap}")"; printf '#!/bin/sh\\n' > "{bwrap}"; chmod +x "{bwrap}";; esac
  case "$*" in *chromium*) mkdir -p "$(dirname "{chromium}")"; printf '#!/bin/sh\\n' > "{chromium}"; chmod +x "{chromium}";; esac
  case "$*" in *postgresql*) mkdir -p "{pg}/16/bin"; printf '#!/bin/sh\\n' > "{pg}/16/bin/initdb";
    chmod +x "{pg}/16/bin/initdb";; esac;;
esac
"""


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def _me() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def _env(tmp_path: Path, *, user: str | None = None, apt: Path | None = None) -> dict[str, str]:
    return {
        **os.environ,
        "DSH_BWRAP": str(tmp_path / "bin" / "bwrap"),
        "DSH_CHROMIUM": str(tmp_path / "bin" / "chromium"),
        "DSH_POSTGRES_ROOT": str(tmp_path / "postgresql"),
        "DSH_POSTGRES_USER": user or _me(),
        "DSH_APT_GET": str(apt or tmp_path / "no-apt-get"),
    }


def _run(env: dict[str, str], prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), "bash", str(SCRIPT)], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def _as_unprivileged() -> list[str]:
    """A command prefix that drops root (the script must not try apt-get as a normal user)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to run the script as a normal user"
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def _as_root() -> list[str]:
    if os.geteuid() == 0:
        return []
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is needed to run the install branch without root"
    return [unshare, "--user", "--map-root-user"]


def _fake_apt(tmp_path: Path, log: Path) -> Path:
    apt = tmp_path / "fake-apt-get"
    apt.write_text(FAKE_APT.format(log=log, bwrap=tmp_path / "bin" / "bwrap", chromium=tmp_path / "bin" / "chromium",
                                   pg=tmp_path / "postgresql"))
    apt.chmod(0o755)
    return apt


class TestFound:
    def test_everything_present_is_reported_and_nothing_is_installed(self, tmp_path: Path) -> None:
        _executable(tmp_path / "bin" / "bwrap")
        _executable(tmp_path / "bin" / "chromium")
        _executable(tmp_path / "postgresql" / "15" / "bin" / "initdb")
        log = tmp_path / "apt.log"
        done = _run(_env(tmp_path, apt=_fake_apt(tmp_path, log)), _as_root())
        assert (done.returncode, done.stdout.strip()) == (0, "system-deps: bubblewrap, chromium and PostgreSQL found")
        assert not log.exists()


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory a dropped-privilege process can read (pytest's tmp_path is private to its user)."""
    made = Path(tempfile.mkdtemp(prefix="dsh-system-deps-"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made)


class TestMissingWithoutRoot:
    def test_missing_chromium_stops_at_once_with_the_one_command(self, open_dir: Path) -> None:
        tmp_path = open_dir
        _executable(tmp_path / "bin" / "bwrap")
        _executable(tmp_path / "postgresql" / "15" / "bin" / "initdb")
        log = tmp_path / "apt.log"
        done = _run(_env(tmp_path, user="root", apt=_fake_apt(tmp_path, log)), _as_unprivileged())
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [
            f"system-deps: the tests need Debian's chromium; {HINT}"]
        assert not log.exists()

    def test_a_server_without_its_user_counts_as_missing(self, open_dir: Path) -> None:
        tmp_path = open_dir
        _executable(tmp_path / "bin" / "bwrap")
        _executable(tmp_path / "bin" / "chromium")
        _executable(tmp_path / "postgresql" / "15" / "bin" / "initdb")
        done = _run(_env(tmp_path, user="no-such-user-dsh"), _as_unprivileged())
        assert done.returncode == 1
        assert done.stderr.strip() == f"system-deps: the tests need Debian's postgresql; {HINT}"

    def test_no_apt_get_prints_the_command_even_as_root(self, tmp_path: Path) -> None:
        done = _run(_env(tmp_path), _as_root())
        assert done.returncode == 1
        assert done.stderr.strip() == f"system-deps: the tests need Debian's bubblewrap chromium postgresql; {HINT}"


class TestInstall:
    def test_root_with_apt_get_installs_exactly_what_is_missing_non_interactively(self, tmp_path: Path) -> None:
        _executable(tmp_path / "postgresql" / "15" / "bin" / "initdb")
        log = tmp_path / "apt.log"
        done = _run(_env(tmp_path, apt=_fake_apt(tmp_path, log)), _as_root())
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1] == "system-deps: bubblewrap, chromium and PostgreSQL installed"
        calls = log.read_text().splitlines()
        assert calls == ["noninteractive -o DPkg::Lock::Timeout=600 update -q",
                         "noninteractive -o DPkg::Lock::Timeout=600 install -y -q bubblewrap chromium"]
        assert (tmp_path / "bin" / "bwrap").exists()

    def test_an_install_that_leaves_something_missing_fails(self, tmp_path: Path) -> None:
        apt = _executable(tmp_path / "apt-that-does-nothing")
        done = _run(_env(tmp_path, apt=apt), _as_root())
        assert done.returncode == 1
        assert "apt-get finished but bubblewrap chromium postgresql is still missing" in done.stderr


class TestWiring:
    def test_make_test_checks_the_system_first(self) -> None:
        plan = subprocess.run(["make", "-n", "-C", str(REPO), "test"], capture_output=True, text=True,
                              timeout=60, check=True).stdout.splitlines()
        commands = [line for line in plan if not line.startswith("make")]
        assert commands[0] == ".ci/system-deps"
        assert any("pytest" in line for line in commands[1:])

    def test_ci_installs_nothing_itself_and_runs_the_readme_command(self) -> None:
        lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
        code = [line for line in lines if line and not line.startswith("#")]
        assert code[-1] == "make test"
        assert not any({"apt-get", "pip", "install"} & set(line.split()) for line in code)
