"""The append statement of a short batch, prepared once per connection and run through libpq.

A durable serial update pays one append statement per commit, so the client's
CPU per statement is a floor of its own. Through psycopg's ``execute`` a call
costs about 80 µs of CPU here (a new cursor and transformer, the named
parameters mapped to positions, every value adapted, the prepared-statement
cache consulted, the row loaded); the statement itself, prepared by name with
its parameter types and run with ``PQexecPrepared`` on the same connection
(:attr:`psycopg.Connection.pgconn`, psycopg's public libpq wrapper), costs
about 15 µs. So the append of up to :data:`SPREAD_MAX` events is:

* one statement per ``[is the first batch][batch size]``, built at import with
  positional parameters; its first use on a connection sends its text with its
  values (one message, one round trip), and a later batch's statement is then
  prepared there (a reconnection is a new connection, prepared anew; a log's
  first batch, once per session, is never prepared);
* parameters passed as bytes: the writer's constant ones (session, lease key,
  holder, epoch) encoded once per writer, the seqs as decimal text, the bodies
  as binary ``bytea`` (no escaping);
* one round trip (``PQexecPrepared`` sends and waits in one call, without the
  GIL), its answer read as three text values.

A server error is raised as psycopg raises it (a lost connection as
:class:`psycopg.OperationalError`, so the :class:`~.link.Link` reconnects and
retries as before); a prepared statement the server forgot (``DISCARD ALL``
by a pooler) is sent with its text again and prepared anew. Longer batches, and
the rare follow-up reads of a refused append, go through psycopg as before.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, Final

import psycopg
from psycopg import errors as pg_errors, pq

from host_spec.host.store.postgres.schema import ADD_SESSION, APPEND, MOVE_TAIL

__all__ = ["SPREAD_MAX", "Answer", "PreparedAppend", "named_append"]

#: Batches of up to this many events pass each body as its own parameter; longer ones one ``bytea[]``.
SPREAD_MAX: Final = 32

#: The statement's answer: notices sent (``1``: stored), the lease's epoch and holder.
Answer = tuple[int, "int | None", "str | None"]

_TEXT, _INT8, _BYTEA = 25, 20, 17  # type oids
#: Parameter order (and types) of the writer's constant part and of every batch.
_FIXED = (("session", _TEXT), ("lease", _TEXT), ("holder", _TEXT), ("epoch", _INT8), ("expected", _INT8), ("tail", _INT8))
#: The first batch's extra parameters (its session row).
_CREATE = (("created", _INT8), ("parent", _TEXT), ("header", _BYTEA))

_NAMES = [f"b{index}" for index in range(1, SPREAD_MAX + 1)]
_ROWS = ["unnest(%(bodies)s::bytea[]) WITH ORDINALITY AS t(body, n)"] + [
    "(VALUES " + ", ".join(f"(%({name})s::bytea, {index})" for index, name in enumerate(_NAMES[:count], 1)) + ") AS t(body, n)"
    for count in range(1, SPREAD_MAX + 1)]
#: The append statement with named parameters (psycopg) by ``[is the first batch][batch size]`` (size 0: ``bytea[]``).
_NAMED = [[APPEND.format(head=head, bodies=rows) for rows in _ROWS] for head in (MOVE_TAIL, ADD_SESSION)]


def named_append(first: bool, count: int) -> str:
    """The append statement with named parameters for psycopg (``count`` 0: the bodies as one ``bytea[]``)."""
    return _NAMED[first][count]


def _positional(query: str, names: list[str]) -> bytes:
    """``query`` with each ``%(name)s`` replaced by ``$k``, ``k`` its place in ``names``."""
    places = {name: index for index, name in enumerate(names, 1)}
    text = re.sub(r"%\((\w+)\)s", lambda found: f"${places[found.group(1)]}", query)
    return text.encode()


def _statement(first: bool, count: int) -> tuple[bytes, bytes, list[int], list[int]]:
    """Name, text, parameter types and parameter formats of one prepared append."""
    params = list(_FIXED) + (list(_CREATE) if first else []) + [(name, _BYTEA) for name in _NAMES[:count]]
    names = [name for name, _ in params]
    types = [oid for _, oid in params]
    formats = [1 if oid == _BYTEA else 0 for oid in types]  # bytea as raw bytes, the rest as text
    return f"dsh_append_{int(first)}_{count}".encode(), _positional(_NAMED[first][count], names), types, formats


#: ``[is the first batch][batch size]`` -> (name, text, types, formats); size 0 unused (psycopg's path).
_STATEMENTS = [[_statement(first, count) if count else (b"", b"", [], []) for count in range(SPREAD_MAX + 1)]
               for first in (False, True)]
#: The statements prepared on each live connection, and the encoding its text parameters use.
_PREPARED: weakref.WeakKeyDictionary[psycopg.Connection[Any], tuple[str, set[bytes]]] = weakref.WeakKeyDictionary()


class PreparedAppend:
    """One writer's prepared append (see the module docstring).

    Args:
        session: The session id.
        lease: The lease key the writer appends under.
        holder: The writer's lease holder name.
        epoch: The writer's lease epoch.
    """

    __slots__ = ("_constants", "_encoded")

    def __init__(self, session: str, lease: str, holder: str, epoch: int) -> None:
        self._constants = (session, lease, holder, b"%d" % epoch)
        self._encoded: tuple[str, list[bytes]] = ("", [])

    def _fixed(self, encoding: str) -> list[bytes]:
        """The constant parameters in ``encoding`` (encoded once per writer and encoding)."""
        if self._encoded[0] != encoding:
            session, lease, holder, epoch = self._constants
            self._encoded = (encoding, [session.encode(encoding), lease.encode(encoding), holder.encode(encoding), epoch])
        return self._encoded[1]

    def run(self, conn: psycopg.Connection[Any], expected: int, bodies: list[bytes],
            create: tuple[int, str | None, bytes] | None = None) -> Answer:
        """Append ``bodies`` (at most :data:`SPREAD_MAX`) after seq ``expected``; ``create``: the first batch's session row.

        Raises:
            psycopg.Error: as psycopg would raise it (``OperationalError``: the connection is lost).
        """
        state = _PREPARED.get(conn)
        if state is None:
            state = _PREPARED[conn] = (conn.info.encoding, set())
        encoding, prepared = state
        count = len(bodies)
        name, text, types, formats = _STATEMENTS[create is not None][count]
        values: list[bytes | None] = [*self._fixed(encoding), b"%d" % expected, b"%d" % (expected + count)]
        if create is not None:
            created, parent, header = create
            values += [b"%d" % created, None if parent is None else parent.encode(encoding), header]
        values += bodies
        pgconn = conn.pgconn
        if name in prepared:
            result = pgconn.exec_prepared(name, values, formats, 0)  # type: ignore[arg-type]  # None: SQL NULL
            if result.error_field(pq.DiagnosticField.SQLSTATE) == b"26000":  # forgotten (DISCARD ALL)
                prepared.clear()
        if name not in prepared:
            # The statement's text and its values in one message and one round trip; then it is
            # prepared for the next batch of its shape (a first batch, once per session, never is).
            result = pgconn.exec_params(text, values, types, formats, 0)
            if create is None and result.status == pq.ExecStatus.TUPLES_OK:
                _check(conn, pgconn.prepare(name, text, types), pq.ExecStatus.COMMAND_OK)
                prepared.add(name)
        _check(conn, result, pq.ExecStatus.TUPLES_OK)
        stored, epoch, holder = result.get_value(0, 0), result.get_value(0, 1), result.get_value(0, 2)
        return (int(stored or 0), None if epoch is None else int(epoch),
                None if holder is None else holder.decode(encoding))


def _check(conn: psycopg.Connection[Any], result: pq.abc.PGresult, expected: pq.ExecStatus) -> None:
    """Raise the error ``result`` holds, as psycopg would, unless it has the ``expected`` status."""
    if result.status == expected:
        return
    if conn.pgconn.status == pq.ConnStatus.BAD or not result.error_field(pq.DiagnosticField.SQLSTATE):
        # no SQLSTATE: libpq's own error (the server closed the connection), which psycopg raises so too
        raise psycopg.OperationalError(f"the connection was lost: {result.error_message.decode(errors='replace').strip()}")
    raise pg_errors.error_from_result(result, encoding=conn.info.encoding)
