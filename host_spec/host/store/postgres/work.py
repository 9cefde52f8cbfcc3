"""The work desk: a member's model calls and workspace tool calls, handed to workers through the store.

The Lead's process writes every log of its Team (one writer, under the root's
lease), so the Team's rules -- mail, the board, waits, interrupts, quiescence --
stay exactly what they are in one process. What it hands out is the *work* of a
member's turn: a model call, or a workspace tool call, each one row of
``dsh_work`` posted after the member's log is durable up to that point. A worker
that holds the *member's* lease (``member:<session>``, the fencing lease of
:mod:`.leases`) takes the member's rows, runs them in its own process, and
writes each answer back; the Lead's process reads the answer and records it in
the member's log as if it had run the call itself.

Fencing: an answer is stored only while its writer still holds the member's
lease under the epoch it took the row with, *and* while the Team is still held
under the epoch the row was posted under. A worker that was presumed dead and
comes back finds the epoch moved and its answer refused
(:meth:`WorkDesk.finish` returns ``False``). The next holder's claim
*recovers* the rows the dead one had taken: a model call is queued again (its
answer was never recorded, so asking again is what a cold resume does), a tool
call is answered ``TOOL_OUTCOME_UNKNOWN`` (it may have run: never run twice).

Every row, and so every member lease and every answer, is bound to the *Team
epoch* (the epoch of the root's lease) it was posted under: a row is posted only
while the poster holds the Team at that epoch, taken and answered only while the
Team lease still carries it. When the Team changes holder (a takeover claims the
root at a higher epoch), the new holder calls :meth:`WorkDesk.take_over` before it
reads the Team's logs: every row of an older Team epoch is withdrawn (queued or
taken: a worker running one aborts it, its answer is refused) or settled (answered
but never recorded: the new holder asks again from the log), and every member
lease of the Team is fenced (its epoch raised, its holder cleared), so a worker
that held a member under the old Team epoch loses it, drops what it had cached of
that member and rebuilds it from the store at its next claim. A cold resume then
closes what the old holder left open from the log, as it always did (a tool call
cut off is answered ``TOOL_OUTCOME_UNKNOWN``): nothing the old holder posted can
be run or recorded after the takeover.

Each row keeps when it was posted, taken and answered (the server's clock), so an
operator can see how long calls wait for a worker.

Once the Lead's process has read an answer it *settles* the row: its request
and answer are dropped (a model call's request is a whole conversation), so the
table holds payloads only for calls in flight. Settled and withdrawn rows are
pruned past the newest :data:`DESK_HISTORY` of their Team (:meth:`WorkDesk.prune`),
so a Team's desk history stays bounded.

Every state change sends ``pg_notify`` on :data:`WORK_CHANNEL` with the member
and the row's number, so neither side polls; a missed notification only delays
(each waiter re-reads on a short timer and after every reconnect).

Room: a worker's presence lease (``worker:<holder>``) also says how many members
it holds and how many it may hold (``held`` and ``capacity`` on its lease row,
layout 4; :meth:`WorkDesk.present`). A call is *placeable* when a live worker
holds its member (a worker runs every call of a member it holds, full or not) or
when some live worker has room to claim it. :meth:`WorkDesk.post` queues a call
only if it is placeable, in the same statement, and otherwise queues nothing and
answers ``False``: the poster runs the call itself at once instead of waiting for
a worker that cannot come. A presence without ``capacity`` (a worker of an older
layout) counts as having room, as every worker did before. Room is a hint read a
moment before the worker acts on it: a call posted just as the last slot was
taken is seen unplaceable by the poster's next look (:attr:`Outcome.placeable`)
and withdrawn then, or after the grace at the latest.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from host_spec.errors import SessionFencedError

__all__ = ["WORK_CHANNEL", "WORK_DDL", "WorkDesk", "Taken", "Outcome", "member_key", "worker_key", "UNKNOWN_OUTCOME",
           "DESK_HISTORY"]

#: The NOTIFY channel of the desk; the payload is ``{"s": member session, "seq": row number}``.
WORK_CHANNEL: Final = "dsh_work"
#: The answer a recovered tool call gets: it was taken by a holder that died, so it may have run.
UNKNOWN_OUTCOME: Final = b'{"lost": "TOOL_OUTCOME_UNKNOWN"}'
#: Settled and withdrawn rows a Team keeps (the newest); older ones are pruned.
DESK_HISTORY: Final = 256

WORK_DDL: Final = """
CREATE TABLE IF NOT EXISTS dsh_work (
    key text COLLATE "C" PRIMARY KEY,
    n bigserial NOT NULL,
    root text COLLATE "C" NOT NULL,
    member text COLLATE "C" NOT NULL,
    kind text NOT NULL,
    request bytea NOT NULL,
    state text NOT NULL DEFAULT 'queued',
    holder text,
    epoch bigint,
    result bytea,
    posted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    taken_at timestamptz,
    answered_at timestamptz
);
CREATE INDEX IF NOT EXISTS dsh_work_open ON dsh_work (member, n) WHERE state IN ('queued', 'taken');
ALTER TABLE dsh_work ADD COLUMN IF NOT EXISTS team_epoch bigint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS dsh_work_root ON dsh_work (root, n);
ALTER TABLE dsh_leases ADD COLUMN IF NOT EXISTS held integer;
ALTER TABLE dsh_leases ADD COLUMN IF NOT EXISTS capacity integer;
"""


def member_key(member: str) -> str:
    """The lease key a worker holds while it runs ``member``'s work."""
    return f"member:{member}"


def worker_key(holder: str) -> str:
    """The lease key that says worker ``holder`` is alive and takes work."""
    return f"worker:{holder}"


#: The Team lease (``t``) still carries the row's (``w``) Team epoch: the row's poster still holds the Team.
_TEAM_HELD = "EXISTS (SELECT FROM dsh_leases t WHERE t.key = w.root AND t.epoch = w.team_epoch AND t.holder IS NOT NULL)"
#: A live worker holds member ``{member}`` (its member lease and its presence are both live).
_HELD_BY_WORKER = """EXISTS (SELECT FROM dsh_leases m JOIN dsh_leases p ON p.key = 'worker:' || m.holder
    WHERE m.key = 'member:' || {member} AND m.holder IS NOT NULL AND m.expires_at > now()
      AND p.holder = m.holder AND p.expires_at > now())"""
#: Some live worker has room for one more member (no ``capacity``: an older worker, counted as having room).
_ROOM = """EXISTS (SELECT FROM dsh_leases p WHERE p.key LIKE 'worker:%%' AND p.holder IS NOT NULL
    AND p.expires_at > now() AND (p.capacity IS NULL OR coalesce(p.held, 0) < p.capacity))"""
#: A call of member ``{member}`` can be run by a worker now (see the module docstring).
_PLACEABLE = f"({_HELD_BY_WORKER} OR {_ROOM})"
_POST = f"""
WITH room AS (
    SELECT {_PLACEABLE.format(member="%(member)s")} AS open
), w AS (
    INSERT INTO dsh_work (key, root, member, kind, request, team_epoch)
    SELECT %(key)s, %(root)s, %(member)s, %(kind)s, %(request)s, t.epoch FROM dsh_leases t, room
    WHERE t.key = %(root)s AND t.holder = %(holder)s AND t.epoch = %(team_epoch)s AND room.open
    ON CONFLICT (key) DO NOTHING RETURNING n, member
) SELECT (SELECT count(*) FROM w), (SELECT count(*) FROM dsh_work WHERE key = %(key)s),
         (SELECT count(*) FROM (SELECT pg_notify('dsh_work', json_build_object('s', member, 'seq', n)::text) FROM w) n),
         (SELECT count(*) FROM dsh_leases t WHERE t.key = %(root)s AND t.holder = %(holder)s
                                              AND t.epoch = %(team_epoch)s)
"""
_OUTCOME = f"""
SELECT w.state, w.result, l.holder IS NOT NULL AND l.epoch = w.epoch AND l.holder = w.holder
       AND l.expires_at > now(), {_TEAM_HELD},
       CASE WHEN w.state = 'queued' THEN {_PLACEABLE.format(member="w.member")} ELSE true END
FROM dsh_work w LEFT JOIN dsh_leases l ON l.key = 'member:' || w.member WHERE w.key = %s
"""
_WITHDRAW = """
UPDATE dsh_work SET state = 'withdrawn', request = ''::bytea, result = NULL WHERE key = %(key)s AND state = ANY(%(states)s)
RETURNING pg_notify('dsh_work', json_build_object('s', member, 'seq', n)::text)
"""
_SETTLE = "UPDATE dsh_work SET state = 'settled', request = ''::bytea, result = NULL WHERE key = %s AND state = 'done'"
_LIVE_WORKERS = "SELECT count(*) FROM dsh_leases WHERE key LIKE 'worker:%' AND holder IS NOT NULL AND expires_at > now()"
_PRESENT = "UPDATE dsh_leases SET held = %(held)s, capacity = %(capacity)s WHERE key = %(key)s AND holder = %(holder)s"
_WANTED = f"""
SELECT w.member, min(w.n) FROM dsh_work w LEFT JOIN dsh_leases l ON l.key = 'member:' || w.member
WHERE w.state IN ('queued', 'taken') AND (l.holder IS NULL OR l.expires_at < now()) AND {_TEAM_HELD}
GROUP BY w.member ORDER BY min(w.n) LIMIT %s
"""
_RECOVER = """
WITH requeued AS (
    UPDATE dsh_work SET state = 'queued', holder = NULL, epoch = NULL
    WHERE member = %(member)s AND state = 'taken' AND kind = 'model' AND epoch IS DISTINCT FROM %(epoch)s
    RETURNING n
), lost AS (
    UPDATE dsh_work SET state = 'done', result = %(unknown)s
    WHERE member = %(member)s AND state = 'taken' AND kind = 'tool' AND epoch IS DISTINCT FROM %(epoch)s
    RETURNING n
) SELECT pg_notify('dsh_work', json_build_object('s', %(member)s::text, 'seq', n)::text)
FROM (SELECT n FROM requeued UNION ALL SELECT n FROM lost) r
"""
_TAKE = f"""
UPDATE dsh_work w SET state = 'taken', holder = %(holder)s, epoch = h.epoch, taken_at = clock_timestamp()
FROM unnest(%(members)s::text[], %(epochs)s::bigint[]) AS h(member, epoch), dsh_leases l
WHERE w.member = h.member AND l.key = 'member:' || h.member AND l.holder = %(holder)s AND l.epoch = h.epoch
  AND l.expires_at > now() AND {_TEAM_HELD}
  AND w.key IN (SELECT key FROM dsh_work WHERE member = ANY(%(members)s::text[]) AND state = 'queued'
                FOR UPDATE SKIP LOCKED)
RETURNING w.member, w.key, w.n, w.root, w.kind, w.request, w.team_epoch
"""
_FINISH = f"""
UPDATE dsh_work w SET state = 'done', result = %(result)s, answered_at = clock_timestamp()
FROM dsh_leases l
WHERE w.key = %(key)s AND w.state = 'taken' AND w.holder = %(holder)s AND w.epoch = %(epoch)s
  AND l.key = 'member:' || w.member AND l.holder = w.holder AND l.epoch = w.epoch AND {_TEAM_HELD}
RETURNING pg_notify('dsh_work', json_build_object('s', w.member, 'seq', w.n)::text)
"""
#: The new holder of a Team (its root claimed at ``epoch``): close every row of an older Team epoch and fence
#: every member lease of the Team (see the module docstring).
_TAKE_OVER = """
WITH closed AS (
    UPDATE dsh_work SET state = CASE WHEN state = 'done' THEN 'settled' ELSE 'withdrawn' END,
        request = ''::bytea, result = NULL
    WHERE root = %(root)s AND team_epoch < %(epoch)s AND state IN ('queued', 'taken', 'done')
    RETURNING member, n
), fenced AS (
    UPDATE dsh_leases SET holder = NULL, expires_at = NULL, epoch = epoch + 1
    WHERE key IN (SELECT 'member:' || id FROM dsh_sessions WHERE lease = %(root)s AND parent IS NOT NULL)
      AND holder IS NOT NULL
    RETURNING key
) SELECT (SELECT count(*) FROM closed), (SELECT count(*) FROM fenced),
         (SELECT count(*) FROM (SELECT pg_notify('dsh_work', json_build_object('s', member, 'seq', n)::text)
                                FROM closed) n)
"""
_PRUNE = """
DELETE FROM dsh_work WHERE root = %(root)s AND state IN ('settled', 'withdrawn') AND n <= (
    SELECT n FROM dsh_work WHERE root = %(root)s AND state IN ('settled', 'withdrawn')
    ORDER BY n DESC OFFSET %(keep)s LIMIT 1)
"""
_OPEN_KEYS = """
SELECT w.key FROM dsh_work w JOIN unnest(%(members)s::text[], %(epochs)s::bigint[]) AS h(member, epoch)
ON w.member = h.member AND w.epoch = h.epoch WHERE w.state = 'taken' AND w.holder = %(holder)s
"""


@attrs.frozen
class Taken:
    """One row a worker took: its member, key, order number, Team root, kind (``model`` | ``tool``), request,
    and the Team epoch it was posted under."""

    member: str
    key: str
    n: int
    root: str
    kind: str
    request: bytes
    team_epoch: int = 0


@attrs.frozen
class Outcome:
    """What the poster reads back: the row's ``state``, its ``result`` when done, whether its holder is live,
    whether the Team is still held under the epoch the row was posted under (``False``: taken over), and,
    for a queued row, whether a worker can still take it (``False``: every live worker is full)."""

    state: str
    result: bytes | None
    holder_live: bool
    team_held: bool = True
    placeable: bool = True


class WorkDesk:
    """The desk's statements over one store handle's connection (see the module docstring).

    Args:
        store: A :class:`~host_spec.host.store.postgres.PostgresStore` (its ``link`` and ``leases``).
        link: The connection to run the statements on (default: the store's; a worker
            gives its taking and claiming a connection of their own, so they never
            queue behind its answers and reads).
    """

    def __init__(self, store: Any, link: Any = None) -> None:
        self.store = store
        self.link = link if link is not None else store.link
        self.holder: str = store.holder

    # ------------------------------------------------------------ the poster (the Lead's process)

    def post(self, key: str, root: str, member: str, kind: str, request: bytes) -> bool:
        """Queue one call under the Team epoch this handle holds ``root`` at; a retried ``key`` queues it once.

        Returns ``False`` when nothing was queued because no live worker holds
        ``member`` or has room for it (the caller runs the call itself, at once).

        Raises:
            SessionFencedError: this handle does not hold the Team's lease (any more): another
                holder took the Team over, and its members' work is that holder's to post.
        """
        try:
            team_epoch = self.store.leases.epoch(root)
        except KeyError:
            team_epoch = None
        params = {"key": key, "root": root, "member": member, "kind": kind, "request": request,
                  "holder": self.holder, "team_epoch": team_epoch}
        row = None if team_epoch is None else self.link.run(lambda conn, _: conn.execute(_POST, params).fetchone())
        if row is not None and (row[0] or row[1]):
            return True
        if row is not None and row[3]:
            return False  # the Team is held: only room was missing
        raise SessionFencedError(
                f"member {member}: the Team {root} is no longer held by this process under lease epoch "
                f"{team_epoch}; its call was not posted", session=member, root=root, epoch=team_epoch)

    def outcome(self, key: str) -> Outcome | None:
        """The row's state now (``None``: no such row)."""
        row = self.link.run(lambda conn, _: conn.execute(_OUTCOME, (key,)).fetchone())
        if row is None:
            return None
        return Outcome(str(row[0]), None if row[1] is None else bytes(row[1]), bool(row[2]), bool(row[3]),
                       bool(row[4]))

    def take_over(self, root: str, epoch: int) -> tuple[int, int]:
        """As the new holder of Team ``root`` (claimed at ``epoch``): close its older rows, fence its member leases.

        Returns how many rows were closed and how many member leases fenced. Run
        before the Team's logs are read, so nothing the old holder posted is run or
        recorded after the takeover. Idempotent (a retried statement closes nothing twice).
        """
        row = self.link.run(lambda conn, _: conn.execute(_TAKE_OVER, {"root": root, "epoch": epoch}).fetchone())
        self.prune(root)
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def prune(self, root: str, keep: int = DESK_HISTORY) -> None:
        """Delete Team ``root``'s settled and withdrawn rows past its newest ``keep``."""
        self.link.run(lambda conn, _: conn.execute(_PRUNE, {"root": root, "keep": keep}))

    def settle(self, key: str) -> None:
        """An answered call whose answer was read: drop its request and answer; its row stays, slim.

        Idempotent (a retried statement settles nothing twice). A settled row keeps
        who ran the call and when; settled and withdrawn rows may be deleted at any time.
        """
        self.link.run(lambda conn, _: conn.execute(_SETTLE, (key,)))

    def withdraw(self, key: str, *, taken_too: bool) -> bool:
        """Take a call back (``True``: it was still queued -- or taken, with ``taken_too``)."""
        states = ["queued", "taken"] if taken_too else ["queued"]
        rows = self.link.run(lambda conn, _: conn.execute(_WITHDRAW, {"key": key, "states": states}).fetchall())
        return bool(rows)

    def live_workers(self) -> int:
        """How many workers hold a live presence lease (take work) now."""
        row = self.link.run(lambda conn, _: conn.execute(_LIVE_WORKERS).fetchone())
        return int(row[0]) if row else 0

    # ------------------------------------------------------------ the worker

    def present(self, held: int, capacity: int) -> None:
        """Say on this holder's presence lease how many members it holds and may hold (its room)."""
        params = {"key": worker_key(self.holder), "holder": self.holder, "held": held, "capacity": capacity}
        self.link.run(lambda conn, _: conn.execute(_PRESENT, params))

    def wanted(self, limit: int) -> list[str]:
        """Members with open work and no live holder, oldest work first (at most ``limit``)."""
        rows = self.link.run(lambda conn, _: conn.execute(_WANTED, (limit,)).fetchall())
        return [str(row[0]) for row in rows]

    def recover(self, member: str, epoch: int) -> None:
        """After claiming ``member`` under ``epoch``: requeue its dead holder's model calls, answer its tool calls unknown."""
        params = {"member": member, "epoch": epoch, "unknown": UNKNOWN_OUTCOME}
        self.link.run(lambda conn, _: conn.execute(_RECOVER, params).fetchall())

    def take(self, held: dict[str, int]) -> list[Taken]:
        """Take every queued call of the members in ``held`` (member -> the epoch this holder has its lease under).

        One statement for all of them; the calls come back in posting order.
        """
        if not held:
            return []
        params = {"members": list(held), "epochs": list(held.values()), "holder": self.holder}
        rows = self.link.run(lambda conn, _: conn.execute(_TAKE, params).fetchall())
        taken = [Taken(str(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4]), bytes(r[5]), int(r[6])) for r in rows]
        return sorted(taken, key=lambda t: t.n)

    def finish(self, key: str, epoch: int, result: bytes) -> bool:
        """Store the answer to ``key``; ``False`` when fenced (the lease moved on) or withdrawn."""
        params = {"key": key, "holder": self.holder, "epoch": epoch, "result": result}
        rows = self.link.run(lambda conn, _: conn.execute(_FINISH, params).fetchall())
        return bool(rows)

    def still_mine(self, held: dict[str, int]) -> set[str]:
        """Keys of the calls this holder took for ``held``'s members (under those epochs), unanswered and not withdrawn."""
        params = {"members": list(held), "epochs": list(held.values()), "holder": self.holder}
        rows = self.link.run(lambda conn, _: conn.execute(_OPEN_KEYS, params).fetchall())
        return {str(row[0]) for row in rows}
