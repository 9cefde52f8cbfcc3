"""JsonlStore: layout, atomic materialization, fsynced appends, locking, tolerant reads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _store_kit import header
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from host_spec.errors import (
    SessionCorruptError,
    SessionError,
    SessionExistsError,
    SessionFormatError,
    SessionLockedError,
    SessionNotFoundError,
)
from host_spec.events import Event, SessionHeader, encode_data, encode_event, encode_header, json_decode
from host_spec.host.store.jsonl_format import header_line
from host_spec.host.store.jsonl import JsonlStore, decode_id, encode_id
from host_spec.host.store.jsonl_log import JsonlSessionLog


def events(start: int, stop: int) -> list[Event]:
    return [Event(seq, 100 + seq, "test/e", encode_data({"n": seq, "pad": "x" * 20})) for seq in range(start, stop)]


def write(backend: JsonlSessionLog, batch: list[Event]) -> None:
    """One host batch: appended at the tail the batch continues, then synced."""
    backend.append(batch, expected_seq=batch[0].seq - 1 if batch else backend.tail_seq)
    backend.sync()


def stored(tmp_path: Path, n: int = 3, session_id: str = "s-1") -> Path:
    """Write a log with n events through the store; return its path."""
    store = JsonlStore(tmp_path)
    backend = store.create(header(session_id))
    write(backend, events(1, n + 1))
    backend.close()
    return store.path(session_id)


def write_raw(tmp_path: Path, lines: list[bytes], session_id: str = "s-1") -> Path:
    path = JsonlStore(tmp_path).path(session_id)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines))
    return path


class TestIdEncoding:
    @given(st.text(min_size=1, max_size=40))
    def test_encoding_is_reversible_and_one_segment(self, session_id: str) -> None:
        """Any non-empty id maps to a single safe path segment and back."""
        segment = encode_id(session_id)
        assert decode_id(segment) == session_id
        assert "/" not in segment and "\0" not in segment and segment not in (".", "..")
        assert set(segment) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-~")

    def test_safe_characters_stay_literal(self) -> None:
        """Readable ids stay readable; others become ~XXXX per UTF-16 unit."""
        assert encode_id("lead-1.child_2") == "lead-1.child_2"
        assert encode_id("a/b~") == "a~002Fb~007E"
        assert encode_id("😀") == "~D83D~DE00"
        assert (encode_id("."), encode_id("..")) == ("~002E", "~002E~002E")

    def test_empty_id_is_refused(self) -> None:
        """An empty id has no directory of its own."""
        with pytest.raises(SessionError) as info:
            encode_id("")
        assert info.value.code == "SESSION_INVALID_ID"


class TestWrite:
    def test_layout_header_then_one_event_per_line(self, tmp_path: Path) -> None:
        """The log lives at sessions/<encoded-id>/session.jsonl: header line, then one event per line."""
        path = stored(tmp_path, 3, session_id="a/b")
        assert path == tmp_path / "sessions" / "a~002Fb" / "session.jsonl"
        lines = path.read_bytes().split(b"\n")
        assert lines[-1] == b"" and len(lines) == 5
        head = json_decode(lines[0])
        assert (head["type"], head["version"], head["id"], head["delegation_depth"]) == ("session", 0, "a/b", 0)
        assert lines[1:4] == [encode_event(e) for e in events(1, 4)]
        assert not (path.parent / "session.jsonl.tmp").exists()

    def test_read_round_trips_header_and_events(self, tmp_path: Path) -> None:
        """read() returns exactly what was written."""
        full = SessionHeader(id="s-1", created_at=5, cwd="/w", parent_session="p", seed_length=2, origin="subagent")
        store = JsonlStore(tmp_path)
        backend = store.create(full)
        write(backend, events(1, 3))
        write(backend, events(3, 4))
        assert backend.size == store.path("s-1").stat().st_size and backend.materialized
        backend.close()
        assert store.read("s-1") == (full, events(1, 4))

    def test_nothing_is_stored_before_the_first_event(self, tmp_path: Path) -> None:
        """Creation is lazy: a writer with no events leaves no log and is not listed."""
        store = JsonlStore(tmp_path)
        backend = store.create(header())
        write(backend, [])
        assert not store.exists("s-1") and store.list_ids() == [] and not backend.materialized
        backend.close()
        backend.close()  # idempotent

    def test_create_refuses_a_stored_session(self, tmp_path: Path) -> None:
        """create() of an id with a log raises SessionExistsError and releases the lock."""
        stored(tmp_path)
        store = JsonlStore(tmp_path)
        with pytest.raises(SessionExistsError):
            store.create(header())
        store.resume("s-1")[0].close()

    def test_materialization_never_overwrites_a_log(self, tmp_path: Path) -> None:
        """If a log appears before the first write, the link fails and the existing log is untouched."""
        store = JsonlStore(tmp_path)
        backend = store.create(header())
        foreign = header_line(header()) + encode_event(events(1, 2)[0]) + b"\n"
        store.path("s-1").write_bytes(foreign)
        with pytest.raises(SessionExistsError):
            write(backend, events(1, 3))
        backend.close()
        assert store.path("s-1").read_bytes() == foreign
        assert not (store.path("s-1").parent / "session.jsonl.tmp").exists()

    def test_a_stale_temp_file_is_cleared_on_create(self, tmp_path: Path) -> None:
        """A temp file left by a crash mid-materialization does not block a new log."""
        store = JsonlStore(tmp_path)
        temp = store.path("s-1").parent / "session.jsonl.tmp"
        temp.parent.mkdir(parents=True)
        temp.write_bytes(b"garbage")
        backend = store.create(header())
        write(backend, events(1, 2))
        backend.close()
        assert store.read("s-1")[1] == events(1, 2) and not temp.exists()

    def test_failed_append_truncates_back_and_retry_does_not_duplicate(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A failing fsync leaves the file at its previous size; retrying writes each line once."""
        store = JsonlStore(tmp_path)
        backend = store.create(header())
        write(backend, events(1, 2))
        size = store.path("s-1").stat().st_size
        real_fsync, calls = os.fsync, []

        def failing_once(fd: int) -> None:
            calls.append(fd)
            if len(calls) == 1:
                raise OSError(5, "I/O error")
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", failing_once)
        with pytest.raises(OSError):
            write(backend, events(2, 4))
        assert store.path("s-1").stat().st_size == size and backend.size == size and backend.tail_seq == 1
        write(backend, events(2, 4))
        backend.close()
        assert store.read("s-1")[1] == events(1, 4)

    def test_a_short_failed_write_is_cut_off_and_retried_at_the_same_tail(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A write that lands half its bytes and fails leaves the file at its synced size."""
        store = JsonlStore(tmp_path)
        backend = store.create(header())
        write(backend, events(1, 2))
        size, real_pwrite = backend.size, os.pwrite

        def half_then_fail(fd: int, data: bytes, offset: int) -> int:
            real_pwrite(fd, bytes(data[: len(data) // 2]), offset)
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "pwrite", half_then_fail)
        with pytest.raises(OSError):
            backend.append(events(2, 4), expected_seq=1)
        assert store.path("s-1").stat().st_size == size and backend.tail_seq == 1
        monkeypatch.setattr(os, "pwrite", real_pwrite)
        write(backend, events(2, 4))
        backend.close()
        assert store.read("s-1")[1] == events(1, 4)

    def test_a_short_write_is_completed_at_the_right_offset(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A ``pwrite`` that lands only part of a batch (and no error) is followed by the rest, in place."""
        store = JsonlStore(tmp_path)
        backend = store.create(header())
        write(backend, events(1, 2))
        real_pwrite = os.pwrite
        calls: list[int] = []

        def at_most_ten(fd: int, data: bytes, offset: int) -> int:
            calls.append(len(data))
            return real_pwrite(fd, bytes(data[:10]), offset)

        monkeypatch.setattr(os, "pwrite", at_most_ten)
        backend.append(events(2, 4), expected_seq=1)
        monkeypatch.setattr(os, "pwrite", real_pwrite)
        backend.sync()
        backend.close()
        assert len(calls) > 2  # the batch took several writes
        assert store.read("s-1")[1] == events(1, 4)

    def test_failed_truncate_is_repaired_before_the_next_write(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """If even the truncate fails, the stale bytes are cut before the next append."""
        store = JsonlStore(tmp_path)
        backend = store.create(header())
        write(backend, events(1, 2))
        real_fsync, real_truncate = os.fsync, os.ftruncate
        monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "I/O error")))
        monkeypatch.setattr(os, "ftruncate", lambda fd, n: (_ for _ in ()).throw(OSError(5, "I/O error")))
        with capture_logs() as logs, pytest.raises(OSError):
            write(backend, events(2, 6))  # four lines land on disk past the committed size
        assert logs[0]["event"] == "session.truncate_failed"
        monkeypatch.setattr(os, "fsync", real_fsync)
        monkeypatch.setattr(os, "ftruncate", real_truncate)
        write(backend, events(2, 3))  # shorter than the stale bytes
        backend.close()
        assert store.read("s-1")[1] == events(1, 3)

    def test_write_after_close_is_refused(self, tmp_path: Path) -> None:
        """A closed writer raises instead of writing without its lock."""
        backend = JsonlStore(tmp_path).create(header())
        backend.close()
        with pytest.raises(SessionError):
            write(backend, events(1, 2))


class TestLock:
    def test_second_writer_in_process_is_locked_out(self, tmp_path: Path) -> None:
        """Two writers of one session cannot coexist; closing the first frees the lock."""
        store = JsonlStore(tmp_path)
        first = store.create(header())
        with pytest.raises(SessionLockedError):
            store.create(header())
        first.close()
        store.create(header()).close()

    def test_writer_in_another_process_locks_us_out(self, tmp_path: Path) -> None:
        """While a real subprocess holds the session, resume raises SessionLockedError naming it."""
        stored(tmp_path)
        script = textwrap.dedent(
            f"""
            import sys
            from host_spec.host.store.jsonl import JsonlStore
            backend, _ = JsonlStore({str(tmp_path)!r}).resume("s-1")
            print("locked", flush=True)
            sys.stdin.read()
            backend.close()
            """
        )
        child = subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "locked"
            with pytest.raises(SessionLockedError) as info:
                JsonlStore(tmp_path).resume("s-1")
            assert str(info.value) == "session s-1 is open in another process: one process per Team"
            assert info.value.code == "SESSION_LOCKED"
        finally:
            child.communicate("", timeout=30)
        JsonlStore(tmp_path).resume("s-1")[0].close()  # released on exit


class TestRead:
    def test_missing_session(self, tmp_path: Path) -> None:
        """read() and resume() of an unknown id raise SessionNotFoundError."""
        store = JsonlStore(tmp_path)
        with pytest.raises(SessionNotFoundError):
            store.read("nope")
        with pytest.raises(SessionNotFoundError):
            store.resume("nope")
        assert not store.exists("nope")

    @pytest.mark.parametrize("cut", [1, 2, 10, -2, -1])
    def test_torn_final_line_is_dropped_with_a_warning(self, tmp_path: Path, cut: int) -> None:
        """A log cut anywhere inside its last line reads as the complete lines, with a torn_tail warning."""
        path = stored(tmp_path, 3)
        data = path.read_bytes()
        last_start = data.rindex(b"\n", 0, len(data) - 1) + 1
        path.write_bytes(data[: last_start + cut if cut > 0 else len(data) + cut])
        with capture_logs() as logs:
            head, found = JsonlStore(tmp_path).read("s-1")
        assert head == header() and found == events(1, 3)
        assert [(e["event"], e["log_level"], e["line"]) for e in logs] == [("session.torn_tail", "warning", 4)]

    def test_unparsable_final_line_is_a_torn_tail(self, tmp_path: Path) -> None:
        """A complete but unparsable last line (e.g. zero-filled blocks) is dropped, not fatal."""
        path = stored(tmp_path, 2)
        path.write_bytes(path.read_bytes() + b"\0\0\0\0\n")
        with capture_logs() as logs:
            assert JsonlStore(tmp_path).read("s-1")[1] == events(1, 3)
        assert logs[0]["event"] == "session.torn_tail" and "unparsable" in logs[0]["reason"]

    def test_writer_open_repairs_the_torn_tail_before_appending(self, tmp_path: Path) -> None:
        """resume() truncates the torn bytes (fsynced) so new lines follow complete ones."""
        path = stored(tmp_path, 3)
        data = path.read_bytes()
        path.write_bytes(data[:-7])
        store = JsonlStore(tmp_path)
        with capture_logs() as logs:
            backend, found = store.resume("s-1")
        assert found == events(1, 3)
        assert [e["event"] for e in logs] == ["session.torn_tail", "session.torn_tail_repaired"]
        assert path.stat().st_size == data.rindex(b"\n", 0, len(data) - 1) + 1
        write(backend, events(3, 5))
        backend.close()
        with capture_logs() as logs:
            assert store.read("s-1")[1] == events(1, 5)
        assert logs == []

    def test_corrupt_middle_line_is_an_error_naming_the_line(self, tmp_path: Path) -> None:
        """An unparsable line followed by more lines is corruption, not a torn tail."""
        path = stored(tmp_path, 3)
        lines = path.read_bytes().split(b"\n")
        lines[2] = b'{"seq": 2, "broken'
        path.write_bytes(b"\n".join(lines))
        with pytest.raises(SessionCorruptError) as info:
            JsonlStore(tmp_path).read("s-1")
        assert "line 3" in str(info.value) and info.value.code == "SESSION_CORRUPT"
        with pytest.raises(SessionCorruptError):
            JsonlStore(tmp_path).resume("s-1")
        JsonlStore(tmp_path).create(header("other")).close()  # the failed open left no lock

    @pytest.mark.parametrize("position", [1, 2])
    def test_seq_gap_is_corruption(self, tmp_path: Path, position: int) -> None:
        """A missing or repeated seq anywhere (even on the last line) is corruption naming the line."""
        rows = events(1, 4)
        rows[position] = events(position + 2, position + 3)[0]
        path = write_raw(tmp_path, [header_line(header())] + [encode_event(e) + b"\n" for e in rows])
        with pytest.raises(SessionCorruptError) as info:
            JsonlStore(tmp_path).read("s-1")
        assert f"line {position + 2}" in str(info.value) and str(path) in str(info.value)

    @pytest.mark.parametrize(
        "first",
        [b"", b"no newline at all", encode_event(events(1, 2)[0]) + b"\n", b"[1,2]\n", b"{oops\n"],
    )
    def test_missing_header_is_corruption(self, tmp_path: Path, first: bytes) -> None:
        """A log that does not start with a complete header line is corrupt."""
        write_raw(tmp_path, [first])
        with pytest.raises(SessionCorruptError):
            JsonlStore(tmp_path).read("s-1")

    def test_invalid_header_fields_are_corruption(self, tmp_path: Path) -> None:
        """A header of the right type but wrong shape is corrupt."""
        write_raw(tmp_path, [b'{"type":"session","id":"s-1","created_at":"yesterday"}\n'])
        with pytest.raises(SessionCorruptError) as info:
            JsonlStore(tmp_path).read("s-1")
        assert "invalid session header" in str(info.value)

    def test_header_written_without_defaults_is_accepted(self, tmp_path: Path) -> None:
        """A header encoded by events.encode_header (type and version omitted) still reads."""
        write_raw(tmp_path, [encode_header(header()) + b"\n", encode_event(events(1, 2)[0]) + b"\n"])
        assert JsonlStore(tmp_path).read("s-1") == (header(), events(1, 2))

    def test_foreign_version_is_a_format_error(self, tmp_path: Path) -> None:
        """Version != 0 is refused before shape checks, naming the path."""
        path = write_raw(tmp_path, [b'{"type":"session","version":1,"id":"s-1","whatever":true}\n'])
        with pytest.raises(SessionFormatError) as info:
            JsonlStore(tmp_path).read("s-1")
        assert str(path) in str(info.value) and info.value.code == "SESSION_FORMAT_UNSUPPORTED"

    def test_identity_mismatch_is_corruption(self, tmp_path: Path) -> None:
        """A log whose header names another session is refused."""
        write_raw(tmp_path, [header_line(header("someone-else"))])
        with pytest.raises(SessionCorruptError) as info:
            JsonlStore(tmp_path).read("s-1")
        assert "identity mismatch" in str(info.value)

    def test_unreadable_data_is_a_clear_error_naming_the_path(self, tmp_path: Path) -> None:
        """OS errors while reading or locking become SessionError with the path in the message."""
        store = JsonlStore(tmp_path)
        store.path("s-1").mkdir(parents=True)  # a directory where the log should be
        with pytest.raises(SessionError) as info:
            store.read("s-1")
        assert str(store.path("s-1")) in str(info.value)
        blocked = JsonlStore(tmp_path / "file-root")
        (tmp_path / "file-root").write_text("not a directory")
        with pytest.raises(SessionError) as info:
            blocked.create(header())
        assert "file-root" in str(info.value)
        with pytest.raises(SessionError) as info:
            blocked.list_ids()
        assert "file-root" in str(info.value)


class TestList:
    def test_ids_in_creation_order(self, tmp_path: Path) -> None:
        """list_ids orders by header created_at, then id; unmaterialized and unreadable logs are skipped."""
        store = JsonlStore(tmp_path)
        assert store.list_ids() == []
        for session_id, created in [("b", 2), ("c", 1), ("a", 2)]:
            backend = store.create(header(session_id, created_at=created))
            write(backend, events(1, 2))
            backend.close()
        store.create(header("lazy")).close()
        write_raw(tmp_path, [b"garbage\n"], session_id="bad")
        with capture_logs() as logs:
            assert store.list_ids() == ["c", "a", "b"]
        assert [e["event"] for e in logs] == ["session.unlistable"]
        assert "JsonlStore" in repr(store)
