"""JSONL checkpoints: a file beside the log, replaced atomically; damage reads as absent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from structlog.testing import capture_logs

from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore
from host_spec.storage import CheckpointedSessions, CheckpointingBackend, Checkpoints
from host_spec.testing import MemoryStorage


def _payload(seq: int) -> bytes:
    """A large payload whose every byte says which save wrote it."""
    return bytes([seq % 251]) * (1 << 20)


class TestLayout:
    def test_the_file_sits_beside_the_session_log(self, tmp_path: Path) -> None:
        store = JsonlStore(tmp_path)
        store.checkpoints.save("lead/1", "team", 7, b"state")
        path = store.checkpoints.path("lead/1", "team")
        assert path.parent == store.path("lead/1").parent
        assert path.is_file() and not path.with_suffix(".tmp").exists()

    def test_the_backends_offer_the_capability(self, tmp_path: Path) -> None:
        assert isinstance(JsonlStore(tmp_path), CheckpointingBackend)
        assert isinstance(JsonlStore(tmp_path).checkpoints, Checkpoints)
        assert isinstance(MemoryStorage(), CheckpointingBackend)

    async def test_the_host_session_store_exposes_them_and_memory_only_has_none(self, tmp_path: Path) -> None:
        host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({}))
        try:
            assert isinstance(host.sessions, CheckpointedSessions)
            assert host.sessions.checkpoints is not None
            host.sessions.checkpoints.save("s", "team", 1, b"x")
            assert JsonlStore(tmp_path).checkpoints.load("s", "team") == (1, b"x")
        finally:
            await host.close()
        volatile = await Host.open(None, None, ScriptedModel.from_mapping({}))
        try:
            assert volatile.sessions.checkpoints is None
        finally:
            await volatile.close()


class TestDamage:
    def test_a_partial_temporary_file_leaves_the_previous_checkpoint_usable(self, tmp_path: Path) -> None:
        checkpoints = JsonlStore(tmp_path).checkpoints
        checkpoints.save("lead", "team", 3, b"previous")
        temp = checkpoints.path("lead", "team").with_suffix(".tmp")
        temp.write_bytes(b'{"version":1,"seq":9,"size":100000,"blake2b":"00"}\nhalf of a pay')
        assert JsonlStore(tmp_path).checkpoints.load("lead", "team") == (3, b"previous")
        checkpoints.save("lead", "team", 9, b"next")  # the leftover is truncated, not appended to
        assert JsonlStore(tmp_path).checkpoints.load("lead", "team") == (9, b"next")

    def test_a_damaged_file_reads_as_absent_with_one_warning(self, tmp_path: Path) -> None:
        checkpoints = JsonlStore(tmp_path).checkpoints
        checkpoints.save("lead", "team", 3, b"payload bytes")
        path = checkpoints.path("lead", "team")
        data = bytearray(path.read_bytes())
        data[-2] ^= 0xFF
        for damaged in (bytes(data), path.read_bytes()[:-3], b"not a head line", b""):
            path.write_bytes(damaged)
            with capture_logs() as logs:
                assert checkpoints.load("lead", "team") is None
            assert [entry["event"] for entry in logs] == ["checkpoint.damaged"]

    def test_an_unreadable_file_reads_as_absent(self, tmp_path: Path) -> None:
        checkpoints = JsonlStore(tmp_path).checkpoints
        checkpoints.path("lead", "team").mkdir(parents=True)  # a directory where the file should be
        with capture_logs() as logs:
            assert checkpoints.load("lead", "team") is None
        assert [entry["event"] for entry in logs] == ["checkpoint.unreadable"]

    def test_a_writer_killed_mid_save_leaves_a_whole_checkpoint(self, tmp_path: Path) -> None:
        """SIGKILL a process that saves 1 MiB checkpoints back to back: whatever is left is one whole save."""
        JsonlStore(tmp_path).checkpoints.save("lead", "team", 1, _payload(1))
        script = textwrap.dedent(
            f"""
            import sys
            from host_spec.host.store.jsonl import JsonlStore
            checkpoints = JsonlStore({str(tmp_path)!r}).checkpoints
            seq = 1
            while True:
                seq += 1
                checkpoints.save("lead", "team", seq, bytes([seq % 251]) * (1 << 20))
                print(seq, flush=True)
            """
        )
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        for _ in range(3):
            assert child.stdout.readline().strip()
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        loaded = JsonlStore(tmp_path).checkpoints.load("lead", "team")
        assert loaded is not None
        seq, payload = loaded
        assert seq >= 4 and payload == _payload(seq)
