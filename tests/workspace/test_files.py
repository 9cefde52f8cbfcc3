"""read_file / write_file / edit_file on real files: results, every error code, and 'nothing written'."""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path

import pytest
from workspace_kit import agent_in, call, events_of, open_host

from host_spec.workspace import WORKSPACE_READ, WORKSPACE_WRITE, FileRead, FileWrite
from host_spec.host.workspace.content import digest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


async def tools(tmp_path: Path, ws: Path, body, config=None):
    host = await open_host(tmp_path / f"data-{uuid.uuid4().hex[:8]}", config)
    try:
        agent = await agent_in(host, ws)
        return await body(host, agent)
    finally:
        await host.close()


async def test_read_numbers_lines_records_the_version_and_marks_truncation(tmp_path: Path, ws: Path) -> None:
    (ws / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))

    async def body(host, agent):
        whole = await call(host, agent, "read_file", path="a.txt")
        part = await call(host, agent, "read_file", path="a.txt", offset=4, limit=3)
        past = await call(host, agent, "read_file", path="a.txt", offset=50)
        return whole, part, past, events_of(agent, WORKSPACE_READ)

    whole, part, past, reads = await tools(tmp_path, ws, body)
    sha = digest((ws / "a.txt").read_bytes())
    assert whole.value["sha256"] == sha and whole.value["lines"] == 10 and "note" not in whole.value
    assert whole.value["content"].splitlines()[0] == "     1\tline 1"
    assert part.value["content"].splitlines() == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert part.value["note"] == "showing lines 4-6 of 10; continue with offset=7"
    assert past.value["content"] == "" and past.value["note"] == "offset 50 is past the end (10 lines)"
    recorded = reads[0].decode(FileRead)
    assert (recorded.path, recorded.sha256, recorded.snapshot) == ("a.txt", sha, (ws / "a.txt").read_text())
    assert reads[0].cause.tool == "read_file" and reads[0].cause.agent_id == "lead"


async def test_read_caps_lines_and_bytes(tmp_path: Path, ws: Path) -> None:
    (ws / "long.txt").write_text("x" * 50 + "\n" + "".join(f"{n}\n" for n in range(100)))

    async def body(host, agent):
        return await call(host, agent, "read_file", path="long.txt")

    result = await tools(tmp_path, ws, body, {"max_line_chars": 10, "read_max_lines": 5, "read_max_bytes": 10_000})
    rows = result.value["content"].splitlines()
    assert rows[0] == "     1\t" + "x" * 10 + " [line cut]" and len(rows) == 5
    assert result.value["note"] == "showing lines 1-5 of 101; continue with offset=6"
    small = await tools(tmp_path, ws, body, {"read_max_bytes": 40})
    assert len(small.value["content"].encode()) <= 40 + 80  # the first row is always shown
    assert small.value["note"].startswith("showing lines 1-")


async def test_write_creates_then_replaces_only_after_a_read(tmp_path: Path, ws: Path) -> None:
    async def body(host, agent):
        created = await call(host, agent, "write_file", path="src/new.py", content="a = 1\n")
        again = await call(host, agent, "write_file", path="src/new.py", content="a = 2\n")  # it wrote it: it knows it
        (ws / "other.py").write_text("keep\n")
        unread = await call(host, agent, "write_file", path="other.py", content="lost\n")
        return created, again, unread, events_of(agent, WORKSPACE_WRITE)

    created, again, unread, writes = await tools(tmp_path, ws, body)
    assert created.value["created"] is True and created.value["bytes"] == 6
    assert again.ok and "created" not in again.value
    assert (ws / "src/new.py").read_text() == "a = 2\n"
    assert unread.code == "FILE_NOT_READ" and (ws / "other.py").read_text() == "keep\n"
    first, second = (event.decode(FileWrite) for event in writes)
    assert first.previous_sha256 is None and second.previous_sha256 == first.sha256 == digest(b"a = 1\n")
    assert second.tool == "write_file" and writes[1].cause.call_id is not None


async def test_external_formatter_write_between_read_and_edit_is_caught_with_a_diff(tmp_path: Path, ws: Path) -> None:
    target = ws / "mod.py"
    target.write_text("def f( x ):\n    return x\n")

    async def body(host, agent):
        await call(host, agent, "read_file", path="mod.py")
        target.write_text("def f(x):\n    return x\n")  # a formatter run outside the tools
        stale = await call(host, agent, "edit_file", path="mod.py", old_string="return x", new_string="return 2 * x")
        await call(host, agent, "read_file", path="mod.py")
        fresh = await call(host, agent, "edit_file", path="mod.py", old_string="return x", new_string="return 2 * x")
        return stale, fresh

    stale, fresh = await tools(tmp_path, ws, body)
    assert stale.code == "FILE_STALE"
    assert "-def f( x ):" in stale.message and "+def f(x):" in stale.message
    assert fresh.ok and target.read_text() == "def f(x):\n    return 2 * x\n"


async def test_identical_bytes_rewritten_are_not_stale(tmp_path: Path, ws: Path) -> None:
    target = ws / "same.txt"
    target.write_text("one\n")

    async def body(host, agent):
        await call(host, agent, "read_file", path="same.txt")
        target.write_text("one\n")  # new mtime, same content: hashes, not timestamps
        os.utime(target, (1, 1))
        return await call(host, agent, "edit_file", path="same.txt", old_string="one", new_string="two")

    assert (await tools(tmp_path, ws, body)).ok and target.read_text() == "two\n"


async def test_edit_counts_occurrences(tmp_path: Path, ws: Path) -> None:
    target = ws / "c.txt"
    target.write_text("a b a b a\n")

    async def body(host, agent):
        await call(host, agent, "read_file", path="c.txt")
        results = {
            "ambiguous": await call(host, agent, "edit_file", path="c.txt", old_string="a", new_string="z"),
            "mismatch": await call(host, agent, "edit_file", path="c.txt", old_string="a", new_string="z",
                                   expected_count=2),
            "missing": await call(host, agent, "edit_file", path="c.txt", old_string="q", new_string="z"),
            "empty": await call(host, agent, "edit_file", path="c.txt", old_string="", new_string="z"),
            "same": await call(host, agent, "edit_file", path="c.txt", old_string="a", new_string="a"),
        }
        unchanged = target.read_text()
        results["all"] = await call(host, agent, "edit_file", path="c.txt", old_string="a", new_string="z",
                                    expected_count=3)
        return results, unchanged

    results, unchanged = await tools(tmp_path, ws, body)
    assert {k: v.code for k, v in results.items()} == {
        "ambiguous": "OLD_STRING_AMBIGUOUS", "mismatch": "OLD_STRING_COUNT_MISMATCH",
        "missing": "OLD_STRING_NOT_FOUND", "empty": "EMPTY_OLD_STRING", "same": "EDIT_NO_CHANGE", "all": None,
    }
    assert "expected_count=3" in results["ambiguous"].message
    assert unchanged == "a b a b a\n" and results["all"].value["replaced"] == 3
    assert target.read_text() == "z b z b z\n"


async def test_expected_sha256_pins_the_version(tmp_path: Path, ws: Path) -> None:
    target = ws / "p.txt"
    target.write_text("v1\n")

    async def body(host, agent):
        read = await call(host, agent, "read_file", path="p.txt")
        wrong = await call(host, agent, "write_file", path="p.txt", content="v2\n", expected_sha256="0" * 64)
        absent = await call(host, agent, "write_file", path="new.txt", content="n\n", expected_sha256="0" * 64)
        right = await call(host, agent, "write_file", path="p.txt", content="v2\n",
                           expected_sha256=read.value["sha256"])
        return wrong, absent, right

    wrong, absent, right = await tools(tmp_path, ws, body)
    assert wrong.code == absent.code == "FILE_STALE"
    assert "does not exist" in absent.message and not (ws / "new.txt").exists()
    assert right.ok and target.read_text() == "v2\n"


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda p: None, "FILE_NOT_FOUND"),
        (lambda p: p.mkdir(), "NOT_A_FILE"),
        (lambda p: p.write_bytes(b"\x89PNG\x00\x00data"), "BINARY_FILE"),
        (lambda p: p.write_bytes(b"caf\xe9\n"), "NOT_UTF8"),
        (lambda p: p.write_text("x" * 2000), "FILE_TOO_LARGE"),
    ],
)
async def test_bad_files_are_refused_by_every_file_tool_and_nothing_is_written(tmp_path, ws, make, code) -> None:
    target = ws / "bad"
    make(target)
    before = target.read_bytes() if target.is_file() else None

    async def body(host, agent):
        read = await call(host, agent, "read_file", path="bad")
        edit = await call(host, agent, "edit_file", path="bad", old_string="x", new_string="y")
        return read, edit, events_of(agent, WORKSPACE_READ) + events_of(agent, WORKSPACE_WRITE)

    read, edit, recorded = await tools(tmp_path, ws, body, {"max_file_bytes": 1000})
    assert read.code == edit.code == code and not recorded
    if before is not None:
        assert target.read_bytes() == before
    if code in ("BINARY_FILE", "NOT_UTF8", "FILE_TOO_LARGE", "NOT_A_FILE"):
        async def overwrite(host, agent):
            return await call(host, agent, "write_file", path="bad", content="new")
        assert (await tools(tmp_path, ws, overwrite, {"max_file_bytes": 1000})).code == code


async def test_new_content_over_the_size_limit_is_refused(tmp_path: Path, ws: Path) -> None:
    async def body(host, agent):
        return await call(host, agent, "write_file", path="big.txt", content="y" * 101)

    assert (await tools(tmp_path, ws, body, {"max_file_bytes": 100})).code == "FILE_TOO_LARGE"
    assert not (ws / "big.txt").exists()


async def test_large_file_guard_has_no_snapshot_but_stays_exact(tmp_path: Path, ws: Path) -> None:
    target = ws / "big.txt"
    target.write_text("a\n" * 100)

    async def body(host, agent):
        await call(host, agent, "read_file", path="big.txt")
        target.write_text("a\n" * 99 + "b\n")
        return await call(host, agent, "edit_file", path="big.txt", old_string="a\n", new_string="c\n",
                          expected_count=99)

    stale = await tools(tmp_path, ws, body, {"snapshot_max_bytes": 50})
    assert stale.code == "FILE_STALE" and "too large to keep; no diff" in stale.message


async def test_atomic_write_keeps_the_mode_and_leaves_no_temp_file(tmp_path: Path, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o755)

    async def body(host, agent):
        await call(host, agent, "read_file", path="run.sh")
        return await call(host, agent, "write_file", path="run.sh", content="echo 2\n")

    assert (await tools(tmp_path, ws, body)).ok
    assert stat.S_IMODE(script.stat().st_mode) == 0o755 and script.read_text() == "echo 2\n"
    assert sorted(p.name for p in ws.iterdir()) == ["run.sh"]


async def test_a_session_without_workspace_gets_no_workspace_tools(tmp_path: Path, ws: Path) -> None:
    host = await open_host(tmp_path / "data")
    try:
        plain = await agent_in(host, None, "plain")
        with_ws = await agent_in(host, ws, "with-ws")
        names = lambda a: {spec.name for spec in host.tools.visible(a)}  # noqa: E731
        refused = await host.tools.execute(None, "c1", "read_file", '{"path": "x"}', __import__(
            "host_spec.records", fromlist=["AbortSignal"]).AbortSignal())
        plain, with_ws, refused = names(plain), names(with_ws), refused
    finally:
        await host.close()
    tools_ = {"read_file", "write_file", "edit_file", "glob", "list_dir", "grep", "bash"}
    assert not plain & tools_ and tools_ <= with_ws
    assert refused.is_error and refused.error["code"] == "UNKNOWN_TOOL"


async def test_a_write_that_cannot_land_is_an_io_error_and_leaves_nothing(tmp_path: Path, ws: Path) -> None:
    (ws / "plain.txt").write_text("x\n")

    async def body(host, agent):
        return await call(host, agent, "write_file", path="plain.txt/inner.txt", content="y\n")

    result = await tools(tmp_path, ws, body)
    assert result.code == "WORKSPACE_IO_ERROR" and (ws / "plain.txt").read_text() == "x\n"
    assert sorted(p.name for p in ws.iterdir()) == ["plain.txt"]


async def test_the_stale_diff_is_capped(tmp_path: Path, ws: Path) -> None:
    target = ws / "many.txt"
    target.write_text("".join(f"{n}\n" for n in range(100)))

    async def body(host, agent):
        await call(host, agent, "read_file", path="many.txt")
        target.write_text("".join(f"{n}!\n" for n in range(100)))
        return await call(host, agent, "write_file", path="many.txt", content="mine\n")

    stale = await tools(tmp_path, ws, body, {"diff_max_lines": 6})
    assert stale.code == "FILE_STALE" and "more diff lines; read the file again)" in stale.message
    assert target.read_text().startswith("0!\n")


async def test_an_unreadable_ledger_record_proves_no_read(tmp_path: Path, ws: Path) -> None:
    (ws / "f.txt").write_text("v\n")

    # The record is folded on resume: a fresh host over the same log.
    data = tmp_path / "data-bad"
    host = await open_host(data)
    session = await host.create_session("lead", cwd=str(ws))
    session.append(WORKSPACE_READ, {"path": "f.txt", "sha256": 7})
    await host.close()
    again = await open_host(data)
    try:
        resumed = await again.resume_session("lead")
        agent = again.start_agent(resumed, name="lead", source="resume")
        result = await call(again, agent, "edit_file", path="f.txt", old_string="v", new_string="w")
    finally:
        await again.close()
    assert result.code == "FILE_NOT_READ" and (ws / "f.txt").read_text() == "v\n"


async def test_bad_config_names_the_field(tmp_path: Path) -> None:
    from host_spec.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        await open_host(tmp_path / "data", {"read_max_lines": 0})
    assert "read_max_lines must be at least 1" in str(info.value) and "plugins.workspace" in str(info.value)
