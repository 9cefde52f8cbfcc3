"""Preallocated JSONL logs: zero-filled space past the end, fdatasync inside it, readers stop at the first NUL.

Real files, real ``fsync``/``fdatasync``, and one real SIGKILL: a crashed writer
leaves its zeros on disk, and the log must read exactly as its complete lines.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _store_kit import header
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from host_spec.errors import SessionCorruptError
from host_spec.events import Event, encode_data, encode_event
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.jsonl_format import header_line
from host_spec.host.store.jsonl_log import PREALLOCATE_CHUNK, PREALLOCATE_FROM, JsonlSessionLog

PAD = "p" * 200


def events(start: int, stop: int) -> list[Event]:
    return [Event(seq, 100 + seq, "test/e", encode_data({"n": seq, "pad": PAD})) for seq in range(start, stop)]


def write(backend: JsonlSessionLog, batch: list[Event]) -> None:
    backend.append(batch, expected_seq=batch[0].seq - 1)
    backend.sync()


#: Enough events to pass the preallocation threshold (each line is > 200 bytes).
MANY = PREALLOCATE_FROM // 200 + 10


def live_log(tmp_path: Path, count: int = MANY) -> tuple[JsonlStore, JsonlSessionLog, Path]:
    store = JsonlStore(tmp_path)
    backend = store.create(header())
    for seq in range(1, count + 1, 50):
        write(backend, events(seq, min(seq + 50, count + 1)))
    return store, backend, store.path("s-1")


def crashed_copy(tmp_path: Path, data: bytes) -> JsonlStore:
    """What a crashed writer leaves: ``data`` in a log nobody holds open."""
    other = tmp_path / "crashed"
    path = JsonlStore(other).path("s-1")
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return JsonlStore(other)


class TestWriter:
    def test_a_short_log_is_never_preallocated(self, tmp_path: Path) -> None:
        """Below the threshold the file is exactly the log (most sessions stay small)."""
        _, backend, path = live_log(tmp_path, 20)
        assert path.stat().st_size == backend.size < PREALLOCATE_FROM
        backend.close()

    def test_a_long_log_keeps_zero_filled_space_in_chunks(self, tmp_path: Path) -> None:
        """Past the threshold the file ends on a chunk boundary and everything past the log is zeros."""
        _, backend, path = live_log(tmp_path)
        data = path.read_bytes()
        assert backend.size >= PREALLOCATE_FROM
        assert len(data) % PREALLOCATE_CHUNK == 0 and len(data) > backend.size
        assert data[backend.size :] == bytes(len(data) - backend.size)
        backend.close()

    def test_readers_see_exactly_the_synced_events_while_the_writer_is_live(self, tmp_path: Path) -> None:
        """A reader of a live preallocated log (dsh log, team show) gets every line and no warning."""
        store, backend, _ = live_log(tmp_path)
        with capture_logs() as logs:
            assert store.read("s-1")[1] == events(1, MANY + 1)
        assert logs == []
        backend.close()

    def test_appends_inside_the_space_are_synced_with_fdatasync(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Inside zero-filled space a batch changes no metadata: fdatasync; a growing batch: fsync."""
        _, backend, path = live_log(tmp_path)
        calls: list[str] = []
        real_fsync, real_fdatasync = os.fsync, os.fdatasync
        monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
        monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append("fdatasync"), real_fdatasync(fd))[1])
        write(backend, events(MANY + 1, MANY + 2))
        allocated = path.stat().st_size
        big = [Event(MANY + 2, 1, "test/e", encode_data({"pad": "q" * (allocated - backend.size + 10)}))]
        write(backend, big)  # crosses the end of the space: the file grows by another chunk
        assert calls == ["fdatasync", "fsync"]
        assert path.stat().st_size > allocated and path.stat().st_size % PREALLOCATE_CHUNK == 0
        backend.close()
        assert JsonlStore(tmp_path).read("s-1")[1][-1] == big[0]

    def test_close_trims_the_space(self, tmp_path: Path) -> None:
        """A closed log is exactly its lines: later tools and tests see no zeros."""
        _, backend, path = live_log(tmp_path)
        size = backend.size
        backend.close()
        assert path.stat().st_size == size and path.read_bytes().endswith(b"\n")

    def test_a_failed_trim_on_close_is_logged_and_the_zeros_stay_readable(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """close() still closes and releases the lock; the zeros left behind read as no line."""
        store, backend, path = live_log(tmp_path)
        monkeypatch.setattr(os, "ftruncate", lambda fd, n: (_ for _ in ()).throw(OSError(5, "EIO")))
        with capture_logs() as logs:
            backend.close()
        monkeypatch.undo()
        assert [e["event"] for e in logs] == ["session.trim_failed"] and path.read_bytes().endswith(b"\0")
        resumed, found = store.resume("s-1")  # the lock was released
        resumed.close()
        assert found == events(1, MANY + 1)

    def test_no_room_for_the_zeros_never_refuses_the_batch(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """On a nearly full disk the batch is stored without preallocation (ENOSPC on the zeros only)."""
        _, backend, path = live_log(tmp_path, 20)
        real_pwrite = os.pwrite

        def no_room_for_zeros(fd: int, data: bytes, offset: int) -> int:
            if bytes(data[:1]) == b"\0":
                real_pwrite(fd, bytes(data[: len(data) // 2]), offset)
                raise OSError(28, "No space left on device")
            return real_pwrite(fd, data, offset)

        monkeypatch.setattr(os, "pwrite", no_room_for_zeros)
        with capture_logs() as logs:
            write(backend, events(21, MANY + 1))
        assert [e["event"] for e in logs] == ["session.preallocation_skipped"]
        assert path.stat().st_size == backend.size >= PREALLOCATE_FROM and backend.tail_seq == MANY
        monkeypatch.undo()
        write(backend, events(MANY + 1, MANY + 2))  # the next growing batch preallocates again
        assert path.stat().st_size % PREALLOCATE_CHUNK == 0
        backend.close()
        assert JsonlStore(tmp_path).read("s-1")[1] == events(1, MANY + 2)

    def test_a_failed_sync_drops_the_space_and_the_retry_preallocates_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The roll-back truncates to the synced size; the retry stores each line once."""
        _, backend, path = live_log(tmp_path)
        size = backend.size
        monkeypatch.setattr(os, "fdatasync", lambda fd: (_ for _ in ()).throw(OSError(5, "EIO")))
        with pytest.raises(OSError):
            write(backend, events(MANY + 1, MANY + 3))
        assert path.stat().st_size == size == backend.size and backend.tail_seq == MANY
        monkeypatch.undo()
        write(backend, events(MANY + 1, MANY + 3))
        assert path.stat().st_size % PREALLOCATE_CHUNK == 0
        backend.close()
        assert JsonlStore(tmp_path).read("s-1")[1] == events(1, MANY + 3)


class TestCrashedTail:
    def test_a_zero_filled_tail_is_not_a_torn_line(self, tmp_path: Path) -> None:
        """Zeros after the last complete line read cleanly; resume trims them without a torn-tail warning."""
        _, backend, path = live_log(tmp_path)
        store = crashed_copy(tmp_path, path.read_bytes())
        backend.close()
        with capture_logs() as logs:
            assert store.read("s-1")[1] == events(1, MANY + 1)
            resumed, found = store.resume("s-1")
        assert found == events(1, MANY + 1)
        assert [(e["event"], e["log_level"]) for e in logs] == [("session.preallocation_trimmed", "info")]
        assert store.path("s-1").read_bytes().endswith(b"\n")
        write(resumed, events(MANY + 1, MANY + 2))
        resumed.close()
        assert store.read("s-1")[1] == events(1, MANY + 2)

    @pytest.mark.parametrize("cut", [1, 40, -1])
    def test_a_half_written_line_inside_the_space_is_dropped(self, tmp_path: Path, cut: int) -> None:
        """Part of an unsynced line before the zeros is a torn tail: dropped with a warning, repaired on resume."""
        _, backend, path = live_log(tmp_path)
        data, size = bytearray(path.read_bytes()), backend.size
        backend.close()
        line = encode_event(events(MANY + 1, MANY + 2)[0]) + b"\n"
        part = line[:cut] if cut > 0 else line[: len(line) + cut]
        data[size : size + len(part)] = part
        store = crashed_copy(tmp_path, bytes(data))
        with capture_logs() as logs:
            resumed, found = store.resume("s-1")
        assert found == events(1, MANY + 1)
        assert [e["event"] for e in logs] == ["session.torn_tail", "session.torn_tail_repaired"]
        assert store.path("s-1").stat().st_size == size
        resumed.close()

    def test_one_stray_line_after_the_zeros_is_a_torn_tail(self, tmp_path: Path) -> None:
        """An unsynced page that landed past a hole is dropped like a torn line."""
        _, backend, path = live_log(tmp_path)
        data, size = path.read_bytes(), backend.size
        backend.close()
        damaged = data[: size + 100] + encode_event(events(MANY + 2, MANY + 3)[0]) + b"\n" + data[size + 400 :]
        with capture_logs() as logs:
            assert crashed_copy(tmp_path, damaged).read("s-1")[1] == events(1, MANY + 1)
        assert logs[0]["event"] == "session.torn_tail" and "unparsable" in logs[0]["reason"]

    def test_lines_after_a_hole_are_corruption(self, tmp_path: Path) -> None:
        """Several lines past a NUL run would be committed data behind a hole: a loud error, not a silent cut."""
        _, backend, path = live_log(tmp_path)
        data, size = path.read_bytes(), backend.size
        backend.close()
        more = b"".join(encode_event(e) + b"\n" for e in events(MANY + 2, MANY + 4))
        damaged = data[: size + 100] + more + data[size + 100 + len(more) :]
        with pytest.raises(SessionCorruptError) as info:
            crashed_copy(tmp_path, damaged).read("s-1")
        assert info.value.details["line"] == MANY + 2


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from host_spec.host.store.sessions import SessionStore
    from host_spec.host.store.jsonl import JsonlStore

    async def main():
        session = SessionStore(JsonlStore(sys.argv[1]), None).create("crash")
        while True:
            session.append("crash/tick", {"n": session.last_seq + 1, "pad": "x" * 200})
            await session.flush()
            print(session.last_seq, flush=True)

    asyncio.run(main())
    """
)


@pytest.mark.slow
def test_sigkill_leaves_zeros_and_loses_no_flushed_event(tmp_path: Path) -> None:
    """A writer killed mid-stream past the threshold: every printed (flushed) event survives, zeros are trimmed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    deadline, last = time.monotonic() + 120, 0
    while last < MANY + 50:
        assert time.monotonic() < deadline, "child too slow"
        line = proc.stdout.readline()
        assert line, f"child exited early: {proc.stderr.read() if proc.stderr else None}"
        if line.strip().isdigit():
            last = int(line)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    last = max([last, *(int(x) for x in proc.stdout.read().split() if x.isdigit())])
    proc.stdout.close()
    store = JsonlStore(tmp_path)
    data = store.path("crash").read_bytes()
    assert data.endswith(b"\0") and len(data) % PREALLOCATE_CHUNK == 0  # the crash left the space behind
    resumed, found = store.resume("crash")
    resumed.close()
    assert len(found) >= last and [e.seq for e in found] == list(range(1, len(found) + 1))
    assert store.path("crash").read_bytes().endswith(b"\n")


class TestWholeLogDecode:
    """The one-call decode of a clean log agrees with the line rules on damaged ones."""

    def test_a_blank_line_in_the_committed_region_is_corruption(self, tmp_path: Path) -> None:
        """decode_lines would skip a blank line; the scan must still name it."""
        path = JsonlStore(tmp_path).path("s-1")
        path.parent.mkdir(parents=True)
        lines = [encode_event(e) + b"\n" for e in events(1, 4)]
        path.write_bytes(header_line(header()) + lines[0] + b"\n" + b"".join(lines[1:]))
        with pytest.raises(SessionCorruptError) as info:
            JsonlStore(tmp_path).read("s-1")
        assert info.value.details["line"] == 3

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        count=st.integers(1, 12),
        damage=st.sampled_from(["none", "garbage", "seq", "cut", "zeros"]),
        where=st.integers(0, 11),
    )
    def test_damage_anywhere_follows_the_line_rules(self, tmp_path: Path, count: int, damage: str, where: int) -> None:
        """Oracle: complete lines decode in order; a bad line is torn if last, else corruption naming it."""
        good = events(1, count + 1)
        lines = [encode_event(e) + b"\n" for e in good]
        index = where % count
        if damage == "garbage":
            lines[index] = b'{"seq": oops}\n'
        elif damage == "seq":
            lines[index] = encode_event(Event(count + 5, 1, "test/e", encode_data({}))) + b"\n"
        elif damage == "cut":
            lines, index = lines[:-1] + [lines[-1][: where % len(lines[-1]) or 1]], count - 1
        elif damage == "zeros":
            lines, index = lines[: index + 1] + [bytes(300)], index + 1
        store = crashed_copy(tmp_path / f"{count}-{damage}-{where}", header_line(header()) + b"".join(lines))
        bad_is_last = index == count - 1
        if damage == "none" or damage == "zeros":
            expected = good if damage == "none" else good[:index]
            assert store.read("s-1")[1] == expected
        elif bad_is_last and damage != "seq":
            assert store.read("s-1")[1] == good[:index]
        else:
            with pytest.raises(SessionCorruptError) as info:
                store.read("s-1")
            assert info.value.details["line"] == index + 2
