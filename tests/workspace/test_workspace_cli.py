"""``dsh run --workspace DIR``: the directory lands in the root's session header, where resume finds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from host_spec.host.cli.main import main
from host_spec.host.store.jsonl import JsonlStore


def script(tmp_path: Path) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"lead": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "out/hello.txt", "content": "hi\n"}}]},
        {"text": "done"},
    ]}))
    return f"scripted:{path}"


def root_header(data: Path):
    store = JsonlStore(data)
    (root,) = store.list_ids()
    return store.read(root)


def test_run_writes_into_the_given_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    data = tmp_path / "data"
    assert main(["run", "--model", script(tmp_path), "--data-dir", str(data), "--workspace", str(ws), "go"]) == 0
    assert (ws / "out/hello.txt").read_text() == "hi\n"
    header, events = root_header(data)
    assert header.cwd == str(ws.resolve())
    assert any(e.type == "workspace/write" and e.cause.tool == "write_file" for e in events)


def test_the_default_workspace_is_the_current_directory(tmp_path: Path, monkeypatch) -> None:
    ws = tmp_path / "here"
    ws.mkdir()
    monkeypatch.chdir(ws)
    assert main(["run", "--model", script(tmp_path), "--data-dir", str(tmp_path / "data"), "go"]) == 0
    assert root_header(tmp_path / "data")[0].cwd == str(ws.resolve())
    assert (ws / "out/hello.txt").exists()


def test_a_missing_workspace_is_refused_before_anything_runs(tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    code = main(["run", "--model", script(tmp_path), "--data-dir", str(data), "--workspace", str(tmp_path / "no"),
                 "go"])
    assert code == 2 and "WORKSPACE_NOT_FOUND" in capsys.readouterr().err
    assert not JsonlStore(data).list_ids()
