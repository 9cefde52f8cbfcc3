"""Checkpointed folds: a Team's folds at a seq, kept beside its Lead log, checked before use.

* :mod:`dsh_team.checkpoint.codec` — what a checkpoint holds, its mark, its bytes.
* :mod:`dsh_team.checkpoint.keeper` — the one checked reader, and when and how one is saved.
* :mod:`dsh_team.checkpoint.folds` — the service's live folds, captured and restored.
"""

from dsh_team.checkpoint.codec import SCHEMA, TeamCheckpoint, decode_checkpoint, encode_checkpoint, mark_of
from dsh_team.checkpoint.folds import LiveFolds
from dsh_team.checkpoint.keeper import NAME, CheckpointKeeper, CheckpointSource, load_checked, mismatch

__all__ = [
    "NAME",
    "SCHEMA",
    "CheckpointKeeper",
    "CheckpointSource",
    "LiveFolds",
    "TeamCheckpoint",
    "decode_checkpoint",
    "encode_checkpoint",
    "load_checked",
    "mark_of",
    "mismatch",
]
