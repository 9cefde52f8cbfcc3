"""Paths resolve inside the workspace: '..', absolute paths and symlinks cannot leave it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from workspace_kit import agent_in, call, open_host
from workspace_kit import calls as kit_calls


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (ws / "inside.txt").write_text("inside\n")
    os.symlink(outside / "secret.txt", ws / "link-out.txt")
    os.symlink(outside, ws / "dir-out")
    os.symlink(ws / "inside.txt", ws / "link-in.txt")
    return ws, outside


async def calls(tmp_path: Path, ws: Path, *requests, config=None) -> list:
    return await kit_calls(tmp_path / "data", ws, *requests, config=config)


@pytest.mark.parametrize("path", ["../outside/secret.txt", "link-out.txt", "dir-out/secret.txt", "sub/../../x"])
async def test_escapes_are_refused_for_every_path_tool(tmp_path, layout, path) -> None:
    ws, outside = layout
    absolute = str(outside / "secret.txt")
    results = await calls(
        tmp_path, ws,
        ("read_file", {"path": path}), ("write_file", {"path": path, "content": "pwned"}),
        ("edit_file", {"path": path, "old_string": "secret", "new_string": "pwned"}),
        ("list_dir", {"path": path}), ("grep", {"pattern": "secret", "path": path}),
        ("read_file", {"path": absolute}), ("write_file", {"path": absolute, "content": "pwned"}),
    )
    assert [r.code for r in results] == ["PATH_OUTSIDE_WORKSPACE"] * len(results)
    assert (outside / "secret.txt").read_text() == "secret\n" and not (tmp_path / "x").exists()


async def test_globs_that_leave_the_workspace_are_refused(tmp_path, layout) -> None:
    ws, _ = layout
    results = await calls(tmp_path, ws, ("glob", {"pattern": "../**"}), ("glob", {"pattern": "/etc/*"}))
    assert [r.code for r in results] == ["PATH_OUTSIDE_WORKSPACE"] * 2


async def test_links_and_absolute_paths_inside_are_followed_as_their_target(tmp_path, layout) -> None:
    ws, _ = layout
    read_link, read_abs, edit = await calls(
        tmp_path, ws, ("read_file", {"path": "link-in.txt"}), ("read_file", {"path": str(ws / "inside.txt")}),
        ("edit_file", {"path": "inside.txt", "old_string": "inside", "new_string": "edited"}),
    )
    assert read_link.value["path"] == read_abs.value["path"] == "inside.txt"  # one file, one ledger entry
    assert edit.ok and (ws / "inside.txt").read_text() == "edited\n"
    assert os.path.islink(ws / "link-in.txt")


async def test_empty_and_nul_paths_are_invalid(tmp_path, layout) -> None:
    ws, _ = layout
    results = await calls(tmp_path, ws, ("read_file", {"path": ""}), ("read_file", {"path": "a\x00b"}))
    assert [r.code for r in results] == ["INVALID_ARGUMENT"] * 2


async def test_a_workspace_that_vanished_is_reported(tmp_path) -> None:
    ws = tmp_path / "gone"
    ws.mkdir()

    host = await open_host(tmp_path / "data")
    try:
        agent = await agent_in(host, ws)
        ws.rmdir()
        result = await call(host, agent, "list_dir")
    finally:
        await host.close()
    assert result.code == "NO_WORKSPACE"
