"""``dsh --version``: the installed distribution's version, from its metadata."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from host_spec.host.cli import main as cli

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


class TestVersion:
    def test_the_console_script_prints_the_project_version(self) -> None:
        dsh = Path(sys.executable).with_name("dsh")
        done = subprocess.run([str(dsh), "--version"], capture_output=True, text=True, timeout=60, check=False)
        declared = tomllib.loads(PYPROJECT.read_text())["project"]["version"]  # an oracle independent of metadata
        assert (done.returncode, done.stdout, done.stderr) == (0, f"dsh {declared}\n", "")

    def test_an_uninstalled_tree_says_so(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert cli.version() == metadata.version("dsh-team")
        monkeypatch.setattr(cli, "DISTRIBUTION", "dsh-team-that-is-not-installed")
        assert cli.version() == "unknown (not installed)"
