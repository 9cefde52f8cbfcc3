"""The user documentation stays readable and connected: a short README, links that resolve, every code documented.

The README is the five-minute read (what it is, the two set-up commands, the tour, links);
the reference material lives in ``docs/`` pages named by topic, and this keeps them honest:
every relative link (and ``#anchor``) in the README, ``docs/`` and ``examples/README.md``
names a file and heading that exist, and every stable Team and workspace code is explained
in ``docs/error-codes.md``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsh_team.errors import TeamCode
from host_spec.workspace import WorkspaceCode

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted([README, ROOT / "examples" / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)

#: The README stays a five-minute read; the lead's round-3 sections bring it to at most this.
README_MAX_LINES = 250


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def _links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text()))


class TestReadme:
    def test_is_a_five_minute_read(self) -> None:
        assert len(README.read_text().splitlines()) < README_MAX_LINES

    def test_says_what_the_tests_need_and_the_one_command(self) -> None:
        text = README.read_text()
        setup = text[text.index("## Set-up: two commands"):text.index("## A 2-minute tour")]
        for needed in ("make demo", "make test", "bubblewrap", "chromium", "postgresql",
                       "sudo apt-get install -y bubblewrap chromium postgresql"):
            assert needed in setup


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_code_fences_are_closed(page: Path) -> None:
    fences = [line for line in page.read_text().splitlines() if line.lstrip().startswith("```")]
    assert len(fences) % 2 == 0


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in _links(page):
        if re.match(r"[a-z]+:", link):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(link)
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(link)
    assert broken == []


class TestErrorCodes:
    def test_every_team_and_workspace_code_is_explained(self) -> None:
        text = (ROOT / "docs" / "error-codes.md").read_text()
        codes = set(TeamCode.ALL) | {value for name, value in vars(WorkspaceCode).items() if name.isupper()}
        missing = sorted(code for code in codes if f"`{code}`" not in text)
        assert missing == []
