"""glob / list_dir / grep over a real tree with .gitignore rules, caps and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from workspace_kit import agent_in, call, open_host
from workspace_kit import calls as kit_calls

from host_spec.host.workspace.ignore import Rule, Rules


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    files = {
        ".gitignore": "build/\n*.log\n/top.txt\n!keep.log\n# comment\n\n",
        "top.txt": "ignored at the root only\n",
        "src/top.txt": "not ignored here\n",
        "src/app.py": "def main():\n    return 'hello'\n",
        "src/util/helpers.py": "HELLO = 'hello'\n",
        "src/debug.log": "hello log\n",
        "src/keep.log": "hello kept\n",
        "build/out.py": "hello built\n",
        "docs/.gitignore": "draft*\n",
        "docs/draft1.md": "hello draft\n",
        "docs/final.md": "hello final\n",
        ".git/config": "hello git\n",
    }
    for rel, text in files.items():
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (ws / "src/blob.bin").write_bytes(b"hello\x00binary")
    return ws


async def calls(tmp_path: Path, ws: Path, *requests, config=None) -> list:
    return await kit_calls(tmp_path / "data", ws, *requests, config=config)


async def test_glob_respects_gitignore(tmp_path, tree) -> None:
    py, md, everything = await calls(tmp_path, tree, ("glob", {"pattern": "**/*.py"}), ("glob", {"pattern": "docs/*"}),
                               ("glob", {"pattern": "**"}))
    assert py.value["items"] == ["src/app.py", "src/util/helpers.py"]
    assert md.value["items"] == ["docs/.gitignore", "docs/final.md"]
    assert "top.txt" not in everything.value["items"] and "src/top.txt" in everything.value["items"]
    assert "src/keep.log" in everything.value["items"] and "src/debug.log" not in everything.value["items"]
    assert not any(item.startswith((".git/", "build/")) for item in everything.value["items"])


async def test_list_dir_marks_directories_and_skips_ignored(tmp_path, tree) -> None:
    root, src, missing, file_ = await calls(tmp_path, tree, ("list_dir", {}), ("list_dir", {"path": "src"}),
                                      ("list_dir", {"path": "nope"}), ("list_dir", {"path": "src/app.py"}))
    assert root.value["items"] == [".gitignore", "docs/", "src/"]
    assert src.value["items"] == ["app.py", "blob.bin", "keep.log", "top.txt", "util/"]
    assert (missing.code, file_.code) == ("FILE_NOT_FOUND", "NOT_A_DIRECTORY")


async def test_grep_finds_lines_skips_ignored_and_binary_files(tmp_path, tree) -> None:
    found, one_file, bad, missing = await calls(
        tmp_path, tree, ("grep", {"pattern": "hel+o"}), ("grep", {"pattern": "return", "path": "src/app.py"}),
        ("grep", {"pattern": "("}), ("grep", {"pattern": "x", "path": "nope"}),
    )
    assert found.value["items"] == [
        "docs/final.md:1: hello final", "src/app.py:2:     return 'hello'", "src/keep.log:1: hello kept",
        "src/util/helpers.py:1: HELLO = 'hello'",
    ]
    assert one_file.value["items"] == ["src/app.py:2:     return 'hello'"]
    assert (bad.code, missing.code) == ("INVALID_PATTERN", "FILE_NOT_FOUND")


async def test_results_are_capped_with_a_marker(tmp_path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for n in range(7):
        (ws / f"f{n}.txt").write_text("match\nmatch\n")
    globbed, grepped = await calls(tmp_path, ws, ("glob", {"pattern": "*.txt"}), ("grep", {"pattern": "match"}),
                             config={"max_matches": 5})
    assert len(globbed.value["items"]) == 5 and globbed.value["truncated"] == "2 more paths not shown"
    assert len(grepped.value["items"]) == 5
    assert grepped.value["truncated"] == "9 more matches not shown; narrow the pattern or the path"


@pytest.mark.parametrize(
    ("line", "path", "is_dir", "ignored"),
    [
        ("*.o", "a/b/c.o", False, True),
        ("/a.o", "x/a.o", False, False),
        ("doc/*.txt", "doc/x.txt", False, True),
        ("doc/*.txt", "doc/sub/x.txt", False, False),
        ("doc/**/x.txt", "doc/sub/deep/x.txt", False, True),
        ("out/", "out", False, False),
        ("out/", "out", True, True),
        ("[ab].c", "b.c", False, True),
        ("[!ab].c", "b.c", False, False),
        ("\\#hash", "#hash", False, True),
        ("file?.md", "file1.md", False, True),
    ],
)
def test_gitignore_rules(line, path, is_dir, ignored) -> None:
    rule = Rule.parse("", line)
    assert rule is not None
    assert Rules((rule,)).ignored(path, is_dir) is ignored


def test_blank_comment_and_bare_negation_lines_are_no_rules() -> None:
    assert [Rule.parse("", line) for line in ("", "   ", "# c", "!", "/")] == [None] * 5
