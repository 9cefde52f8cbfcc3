"""The tables and the append statement of the PostgreSQL store.

The tables, created on first use (under an advisory lock, so two processes
starting together do not race on ``CREATE``):

* ``dsh_sessions``: one row per stored session, its encoded header, its tail
  seq and the lease key it is written under (the root of its session tree).
* ``dsh_events``: one row per event, keyed by ``(session, seq)``, the event's
  encoded JSON as bytes (lossless, byte-for-byte as the JSONL store writes it)
  and the lease epoch of the writer that stored it.
* ``dsh_runs``: how each root was started (profile and model), so ``dsh
  resume`` on another machine needs no flags.
* ``dsh_work`` (layout 2, :mod:`.work`): a member's model and tool calls handed to
  workers, with their answers; layout 3 binds each row to the Team epoch it was
  posted under (``team_epoch``), added to an older database's table on first use.
* ``dsh_leases``: who may write a session tree now (``holder``), until when
  (``expires_at``, the server's clock, so machines need not agree on time) and
  the fencing ``epoch`` every claim raises. Layout 4 adds ``last_holder`` (who
  claimed it last, kept after a release, so a process that lost its Team can
  name who took it) and ``held`` and ``capacity``, set only on a worker's
  presence lease: how many members it holds and may hold (:mod:`.work`, its room).
* ``dsh_checkpoints`` (layout 4, :mod:`.checkpoints`): each session's newest
  checkpoint of each name, a cache of a plugin's folds. It is created with the
  other tables, under the schema lock, so reading a checkpoint never waits on a
  lock of its own (a holder frozen mid-creation would stall every resume).

A batch is stored by :data:`APPEND`, one statement in one round trip and one
transaction: it takes the writer's lease row ``FOR SHARE`` (appends of one
holder run side by side; a claim, which updates the row, waits for the appends
that hold it, and an append that comes after a claim waits for it and then reads
the raised epoch, so every append that commits after a claim is fenced),
compares and sets the session's tail (or inserts the session row, for a log's
first batch), inserts the events and sends ``pg_notify`` on :data:`CHANNEL`,
which PostgreSQL delivers only if the transaction commits. Its answer is the
number of notices sent (``1``: stored) and the lease's epoch and holder, from
which the writer tells a fenced append from a moved tail.

One statement costs the server measurably less than the same steps as
statements of a ``plpgsql`` function, ``dsh_append``, which hosts used before;
the function stays in the layout, unchanged, so hosts of this layout that still
call it keep working on a database this one created.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ADD_SESSION", "APPEND", "CHANNEL", "DDL", "MOVE_TAIL", "SCHEMA_LOCK", "SCHEMA_VERSION"]

#: The NOTIFY channel of every commit; the payload is ``{"s": session, "seq": tail}``.
CHANNEL: Final = "dsh_log"
#: Advisory lock key held while the schema is created.
SCHEMA_LOCK: Final = 0x64736801
#: The layout this module writes; a database with a newer one is refused.
SCHEMA_VERSION: Final = 4

#: One batch, with ``{head}`` (:data:`MOVE_TAIL` or :data:`ADD_SESSION`) and ``{bodies}`` (rows ``t(body, n)``, ``n`` from 1).
APPEND: Final = """
WITH lease AS (
    SELECT epoch, holder FROM dsh_leases WHERE key = %(lease)s FOR SHARE
), head AS (
    {head}
), rows AS (
    INSERT INTO dsh_events (session, seq, epoch, body)
    SELECT %(session)s, %(expected)s::bigint + t.n, %(epoch)s, t.body FROM head, {bodies}
), notice AS (
    SELECT pg_notify('""" + CHANNEL + """', json_build_object('s', %(session)s::text, 'seq', %(tail)s::bigint)::text)
    FROM head
)
SELECT (SELECT count(*) FROM notice), (SELECT epoch FROM lease), (SELECT holder FROM lease)
"""
_LEASED = "EXISTS (SELECT FROM lease WHERE epoch = %(epoch)s AND holder = %(holder)s)"
#: The compare-and-set of a stored session's tail, under the writer's lease.
MOVE_TAIL: Final = f"""UPDATE dsh_sessions SET tail = %(tail)s
    WHERE id = %(session)s AND tail = %(expected)s AND {_LEASED} RETURNING id"""
#: A created log's first batch stores its session row, unless one is stored (two creators raced).
ADD_SESSION: Final = f"""INSERT INTO dsh_sessions (id, created_at, parent, lease, header, tail)
    SELECT %(session)s, %(created)s, %(parent)s, %(lease)s, %(header)s, %(tail)s WHERE {_LEASED}
    ON CONFLICT (id) DO NOTHING RETURNING id"""

DDL: Final = """
CREATE TABLE IF NOT EXISTS dsh_schema (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS dsh_sessions (
    id text COLLATE "C" PRIMARY KEY,
    created_at bigint NOT NULL,
    parent text,
    lease text NOT NULL,
    header bytea NOT NULL,
    tail bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS dsh_events (
    session text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    epoch bigint NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE TABLE IF NOT EXISTS dsh_runs (
    session text COLLATE "C" PRIMARY KEY,
    settings bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS dsh_checkpoints (
    session text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    payload bytea NOT NULL,
    PRIMARY KEY (session, name)
);
CREATE TABLE IF NOT EXISTS dsh_leases (
    key text COLLATE "C" PRIMARY KEY,
    holder text,
    epoch bigint NOT NULL,
    expires_at timestamptz
);
ALTER TABLE dsh_leases ADD COLUMN IF NOT EXISTS last_holder text;
CREATE OR REPLACE FUNCTION dsh_append(
    p_session text, p_lease text, p_holder text, p_epoch bigint, p_expected bigint,
    p_bodies bytea[], p_header bytea, p_created bigint, p_parent text,
    OUT status text, OUT tail bigint, OUT epoch bigint
) LANGUAGE plpgsql AS $$
DECLARE
    l_holder text;
    n bigint := coalesce(array_length(p_bodies, 1), 0);
BEGIN
    SELECT l.holder, l.epoch INTO l_holder, epoch FROM dsh_leases l WHERE l.key = p_lease FOR SHARE;
    IF epoch IS DISTINCT FROM p_epoch OR l_holder IS DISTINCT FROM p_holder THEN
        status := 'fenced';
        RETURN;
    END IF;
    IF p_header IS NOT NULL THEN
        INSERT INTO dsh_sessions (id, created_at, parent, lease, header, tail)
        VALUES (p_session, p_created, p_parent, p_lease, p_header, n)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            status := 'exists';
            RETURN;
        END IF;
    ELSE
        UPDATE dsh_sessions s SET tail = p_expected + n WHERE s.id = p_session AND s.tail = p_expected;
        IF NOT FOUND THEN
            SELECT s.tail INTO tail FROM dsh_sessions s WHERE s.id = p_session;
            status := 'conflict';
            RETURN;
        END IF;
    END IF;
    INSERT INTO dsh_events (session, seq, epoch, body)
    SELECT p_session, p_expected + i, p_epoch, p_bodies[i] FROM generate_subscripts(p_bodies, 1) AS i;
    PERFORM pg_notify('dsh_log', json_build_object('s', p_session, 'seq', p_expected + n)::text);
    status := 'ok';
    tail := p_expected + n;
END $$;
"""
