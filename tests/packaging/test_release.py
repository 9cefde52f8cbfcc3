"""One version, named the same everywhere: ``pyproject.toml``, the installed metadata, ``dsh --version``, the CHANGELOG.

The version is written once, in ``pyproject.toml``; the package metadata comes
from it at build time and ``dsh --version`` reads the metadata. The CHANGELOG's
newest dated release must be that version, so a user who reads "0.3.0" anywhere
finds its changes under ``## [0.3.0] - DATE``, and work after it goes under
``## [Unreleased]`` at the top.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RELEASE = re.compile(r"^## \[(?P<version>\d+\.\d+\.\d+)\] - (?P<date>\d{4}-\d{2}-\d{2})$")


def sections() -> list[str]:
    return [line for line in (REPO / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")]


def test_metadata_dsh_version_and_the_newest_release_agree() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    dsh = Path(sys.executable).with_name("dsh")
    printed = subprocess.run([str(dsh), "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    releases = [m for m in map(RELEASE.match, sections()) if m is not None]
    assert releases, "the CHANGELOG names no release"
    assert (metadata.version("dsh-team"), printed, releases[0]["version"]) == (declared, f"dsh {declared}\n", declared)


def test_the_changelog_opens_with_unreleased_then_dated_releases_newest_first() -> None:
    found = sections()
    assert found[0] == "## [Unreleased]"
    releases = [RELEASE.match(line) for line in found[1:]]
    assert all(releases), [line for line, m in zip(found[1:], releases) if m is None]
    versions = [tuple(map(int, m["version"].split("."))) for m in releases if m]
    dates = [datetime.date.fromisoformat(m["date"]) for m in releases if m]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    assert dates == sorted(dates, reverse=True)
