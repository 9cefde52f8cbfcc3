"""A Team checkpoint: every fold the Team builds from its Lead log, at one seq, as bytes.

A cold start (``dsh resume``, ``dsh team show``, ``dsh team serve``, a
worker's takeover) would fold the whole Lead log; a checkpoint lets it fold only
the events after ``seq``. It holds the state of each fold the Team keeps with a
``(session, count, state)`` cursor, all at the same ``seq``:

* ``team``: the Team fold (:class:`~dsh_team.core.state.TeamState`: roster,
  board, mailbox, mode, the change index cursor waits read, quiescence);
* ``controls``: gate runs and plan approval; ``permissions``: asks and answers;
* ``costs``: the cost ledger;
* ``roles``, ``shutdowns``, ``worktrees``, ``merges``: each member's latest side
  record of its kind (:mod:`dsh_team.log.member_records`).

The log stays the truth: a checkpoint is used only when it is checked against
the log it claims to cover (``schema`` is this build's :data:`SCHEMA`, ``seq``
is within the log, and ``mark`` matches the log at ``seq``); anything else is
ignored and the full fold runs.

Why the mark is a digest of the header and the one event at ``seq``, not a
running hash of the whole prefix: checking a running hash means hashing every
event up to ``seq``, the O(history) work a checkpoint exists to avoid. A Lead
log has one writer at a time and only grows; recovery only drops a torn or
unflushed tail (the argument of :mod:`host_spec.carry`). So a log with the same
header (id and creation time: a log recreated under the same id differs there)
that still holds, at ``seq``, the exact event the checkpoint was taken after is
the log the checkpoint folded: the only way the prefix could differ is a
rewrite of committed events, which the store itself refuses as corruption when
it reads them. The event's bytes include its time and payload, so a tail that a
crash dropped and a later writer refilled differs there. Checking costs one
event encode and one BLAKE2b of a few hundred bytes.

The encoding is JSON through msgspec (big integers and floats round-trip
exactly); the persistent maps (:class:`immutables.Map`) are written as objects
and rebuilt typed, and the listing memos (:class:`~dsh_team.core.persistent.Memo`)
are left out (they are rebuilt on first read and never take part in equality).
Encoder and decoder are built once.
"""

from __future__ import annotations

import hashlib
import typing
from typing import Any, Final

import immutables
import msgspec

from host_spec.events import Event, SessionHeader, encode_event, encode_header

from dsh_team.controls.ledger import ControlsState
from dsh_team.core.persistent import Memo
from dsh_team.core.state import TeamState
from dsh_team.cost.ledger import CostLedger
from dsh_team.permissions.ledger import PermissionsState
from dsh_team.roster.roles import RoleRecord
from dsh_team.roster.shutdown import ShutdownRecord
from dsh_team.worktrees.records import MergeRecord, WorktreeRecord

__all__ = ["SCHEMA", "TeamCheckpoint", "decode_checkpoint", "encode_checkpoint", "mark_of"]

#: The checkpoint schema this build writes and reads. Raise it whenever any fold's
#: state type changes shape or meaning: an older checkpoint is then ignored (a full
#: fold runs once and the next checkpoint is of the new schema).
SCHEMA: Final = 1


class TeamCheckpoint(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Every Team fold of one Lead log after its first ``seq`` events.

    Attributes:
        schema: :data:`SCHEMA` of the build that wrote it.
        team_id: The Lead session id.
        seq: How many events the folds cover (``events[:seq]``).
        mark: :func:`mark_of` the log's header and its event at ``seq``.
    """

    schema: int
    team_id: str
    seq: int
    mark: str
    team: TeamState
    controls: ControlsState
    permissions: PermissionsState
    costs: CostLedger
    roles: dict[str, RoleRecord]
    shutdowns: dict[str, ShutdownRecord]
    worktrees: dict[str, WorktreeRecord]
    merges: dict[str, MergeRecord]


class _Schema(msgspec.Struct):
    """What is read first: a checkpoint of another schema is not decoded further."""

    schema: int


def mark_of(header: SessionHeader, event: Event) -> str:
    """The digest a checkpoint covering the log up to ``event`` carries (see the module docstring)."""
    digest = hashlib.blake2b(encode_header(header), digest_size=16)
    digest.update(b"\n")
    digest.update(encode_event(event))
    return digest.hexdigest()


def _enc_hook(value: Any) -> Any:
    if isinstance(value, immutables.Map):
        return dict(value.items())
    raise TypeError(f"a checkpoint cannot encode {type(value).__name__}")


def _dec_hook(kind: Any, value: Any) -> Any:
    if kind is Memo:
        return Memo()
    # Every other type msgspec does not know in a fold's state is an ``immutables.Map[K, V]``.
    key, item = typing.get_args(kind)
    return immutables.Map(msgspec.convert(value, dict[key, item], dec_hook=_dec_hook))  # type: ignore[valid-type]


_ENCODER: Final = msgspec.json.Encoder(enc_hook=_enc_hook)
_DECODER: Final = msgspec.json.Decoder(TeamCheckpoint, dec_hook=_dec_hook)
_SCHEMA: Final = msgspec.json.Decoder(_Schema)


def encode_checkpoint(checkpoint: TeamCheckpoint) -> bytes:
    """The bytes a store keeps (the listing memos are written empty)."""
    return _ENCODER.encode(_without_memos(checkpoint))


def _without_memos(checkpoint: TeamCheckpoint) -> TeamCheckpoint:
    team = checkpoint.team
    members = team.members
    tasks = team.tasks
    if members.memo or tasks.memo:
        team = msgspec.structs.replace(
            team,
            members=msgspec.structs.replace(members, memo=Memo()),
            tasks=msgspec.structs.replace(tasks, memo=Memo()),
        )
        checkpoint = msgspec.structs.replace(checkpoint, team=team)
    return checkpoint


def decode_checkpoint(payload: bytes) -> TeamCheckpoint:
    """The checkpoint ``payload`` holds.

    Raises:
        msgspec.DecodeError: the payload is unreadable, of another schema
            (:class:`msgspec.ValidationError` naming ``schema``), or does not fit it.
    """
    schema = _SCHEMA.decode(payload).schema
    if schema != SCHEMA:
        raise msgspec.ValidationError(f"checkpoint schema {schema} is not the supported schema {SCHEMA}")
    return _DECODER.decode(payload)
