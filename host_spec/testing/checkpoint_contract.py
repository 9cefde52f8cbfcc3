"""The checkpoint conformance suite: what every :class:`host_spec.storage.Checkpoints` keeps.

Subclass :class:`CheckpointsContract` and give it a ``checkpoints`` fixture: a
zero-argument factory returning a *new handle on the same medium* at every call
(a second process, or a restart)::

    class TestMyCheckpoints(CheckpointsContract):
        @pytest.fixture
        def checkpoints(self, tmp_path):
            return lambda: MyBackend(tmp_path).checkpoints

Covered: nothing saved reads as ``None``; a save is read back exactly by another
handle; a later save replaces the earlier one (the seq may go down: the caller
decides); names and sessions are independent; a bad name or seq is refused and
stores nothing. A crash in the middle of a save is the medium's own test (for a
file: a temporary file left behind), as a torn log line is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from host_spec.storage import Checkpoints

__all__ = ["CheckpointsContract", "CheckpointsFactory"]

#: What the ``checkpoints`` fixture returns: a new handle on the same medium per call.
CheckpointsFactory = Callable[[], Checkpoints]

_PAYLOAD = bytes(range(256)) * 3 + b"\n\0{}"


def _refused(call: Callable[[], object]) -> bool:
    try:
        call()
    except ValueError:
        return True
    return False


class CheckpointsContract:
    """The rules of :class:`~host_spec.storage.Checkpoints`, as pytest test methods."""

    def test_nothing_saved_reads_as_none(self, checkpoints: CheckpointsFactory) -> None:
        assert checkpoints().load("s-1", "team") is None

    def test_a_save_is_read_back_exactly_by_another_handle(self, checkpoints: CheckpointsFactory) -> None:
        checkpoints().save("s-1", "team", 42, _PAYLOAD)
        assert checkpoints().load("s-1", "team") == (42, _PAYLOAD)

    def test_an_empty_payload_round_trips(self, checkpoints: CheckpointsFactory) -> None:
        checkpoints().save("s-1", "team", 0, b"")
        assert checkpoints().load("s-1", "team") == (0, b"")

    def test_a_later_save_replaces_the_earlier_one(self, checkpoints: CheckpointsFactory) -> None:
        store = checkpoints()
        store.save("s-1", "team", 10, b"first")
        store.save("s-1", "team", 20, b"second, longer than the first")
        assert checkpoints().load("s-1", "team") == (20, b"second, longer than the first")
        store.save("s-1", "team", 5, b"third")
        assert checkpoints().load("s-1", "team") == (5, b"third")

    def test_names_and_sessions_are_independent(self, checkpoints: CheckpointsFactory) -> None:
        store = checkpoints()
        store.save("s-1", "team", 1, b"a")
        store.save("s-1", "other", 2, b"b")
        store.save("s/2 \u00e9", "team", 3, b"c")
        reader = checkpoints()
        assert reader.load("s-1", "team") == (1, b"a")
        assert reader.load("s-1", "other") == (2, b"b")
        assert reader.load("s/2 \u00e9", "team") == (3, b"c")
        assert reader.load("s-3", "team") is None

    def test_a_bad_name_or_seq_is_refused_and_stores_nothing(self, checkpoints: CheckpointsFactory) -> None:
        store = checkpoints()
        for name in ("", "../x", "a/b", "Team", "a b"):
            assert _refused(functools.partial(store.save, "s-1", name, 1, b"x")), name
            assert _refused(functools.partial(store.load, "s-1", name)), name
        assert _refused(lambda: store.save("s-1", "team", -1, b"x"))
        assert checkpoints().load("s-1", "team") is None
