"""Remember how a root session was started, so ``dsh resume`` needs no flags.

A crashed run is resumed with the profile and model it started with; asking the
user to repeat them (and to get them right) is how peer tools end up resuming a
team with the wrong tools. One small JSON file per root lives beside the logs at
``<data_dir>/runs/<encoded-id>.json``, written atomically (a uniquely named temp,
fsync, rename) while the root session's lock is held and before the root does
anything, so even a run killed at its first step can resume, and no other
process can write the record of a run it does not own.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
import msgspec

from host_spec.host.store.jsonl_format import encode_id

__all__ = ["RunSettings", "record", "lookup", "absolute_spec", "decode_settings", "encode_settings"]

_RUNS = "runs"


class RunSettings(msgspec.Struct, frozen=True):
    """The profile and model spec a root session was started with."""

    profile: str
    model: str


_decoder = msgspec.json.Decoder(RunSettings)
_encoder = msgspec.json.Encoder()


def encode_settings(settings: RunSettings) -> bytes:
    """The record's bytes (a shared store keeps them in its own table)."""
    return _encoder.encode(settings)


def decode_settings(data: bytes) -> RunSettings | None:
    """A record from its bytes, or ``None`` when unreadable."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError:
        return None


def absolute_spec(spec: str, *, prefix: str = "") -> str:
    """Make the file part of a spec absolute (``scripted:x.json``, ``my.toml``); names pass through.

    With a ``prefix``, only a spec of that kind names a file: ``openai:m?base_url=http://h/v1``
    is kept as it is.
    """
    if prefix:
        return prefix + str(Path(spec[len(prefix):]).resolve()) if spec.startswith(prefix) else spec
    if spec.endswith(".toml") or os.sep in spec:
        return str(Path(spec).resolve())
    return spec


def _path(data_dir: Path, session_id: str) -> Path:
    return data_dir / _RUNS / f"{encode_id(session_id)}.json"


def record(data_dir: Path, session_id: str, settings: RunSettings) -> None:
    """Durably store ``settings`` for ``session_id`` (replacing an older record)."""
    target = _path(data_dir, session_id)
    target.parent.mkdir(exist_ok=True)
    # A unique temp name: two writers never write into one temp file (a shared name let
    # one run's rename publish the other's half-written record).
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(_encoder.encode(settings))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def lookup(data_dir: Path, session_id: str) -> RunSettings | None:
    """The recorded settings of ``session_id``, or ``None`` (never recorded, or unreadable)."""
    try:
        return _decoder.decode(_path(data_dir, session_id).read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
