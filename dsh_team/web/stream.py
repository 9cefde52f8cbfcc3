"""Live, resumable updates: the panel's server-sent events.

Every message's id is a position of the Lead log (the last seq folded), so a
browser that reconnects with ``Last-Event-ID: N`` gets exactly what happened
after ``N``: nothing it already has, nothing lost. Kinds:

* ``snapshot`` -- the whole document (first connect, or an id the log does not
  have: a reset);
* ``team`` -- roster, board, mode or failure changed: the whole document except
  the timeline, which carries only the new entries;
* ``mail`` -- only the mailbox changed: pending mail, per-member pending and
  unread counts, the status of the messages it touched, and the new timeline entries (see :func:`~dsh_team.web.document.mail_delta`);
* ``status`` -- live statuses changed (no log position moved: same id).

The fold runs only while somebody watches: a change with no watcher costs one
check, and the first watcher catches the fold up from where it stopped. Each
change is encoded once and shared by every watcher.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final

import msgspec

from dsh_team.web.document import TIMELINE_WINDOW, PanelFold, document, mail_delta, member_statuses, plain
from dsh_team.web.sources import LogSource

__all__ = ["Feed", "Message", "RETRY_MS"]

#: How soon a browser reconnects after a dropped stream.
RETRY_MS: Final = 1000

#: ``{"event", "id", "data"}`` as sse-starlette sends it; ``None`` ends the stream.
Message = dict[str, Any]

_json: Final = msgspec.json.Encoder()


def _message(kind: str, seq: int, data: Any) -> Message:
    return {"event": kind, "id": str(seq), "data": _json.encode(data).decode(), "retry": RETRY_MS}


class Feed:
    """The folded Lead log of one source and the queues of its watchers.

    Args:
        source: Where the log comes from.
    """

    def __init__(self, source: LogSource) -> None:
        self.source = source
        self._fold: PanelFold | None = None
        self._watchers: set[asyncio.Queue[Message | None]] = set()
        self._statuses: dict[str, str] = {}
        self._scheduled = False
        self.published = 0

    @property
    def watching(self) -> int:
        """How many streams are open."""
        return len(self._watchers)

    # ------------------------------------------------------------ folding

    def fold(self) -> PanelFold | None:
        """The fold, made on first use (``None`` before the Lead exists); callers advance it."""
        team_id = self.source.team_id
        if team_id is None:
            return None
        if self._fold is None:
            self._fold = PanelFold(team_id)
        return self._fold

    def document(self) -> dict[str, Any] | None:
        """The current document, caught up (``None`` before the Lead exists)."""
        fold = self.fold()
        if fold is None:
            return None
        fold.advance(self.source.events, self.source.durable)
        return self._document(fold)

    def _document(self, fold: PanelFold) -> dict[str, Any]:
        source = self.source
        live = source.status if source.live else None
        until = None if fold.seq >= source.durable else fold.time  # writes and usage as of the fold's position
        doc = document(fold, log_length=len(source.events), live=live, enabled=source.enabled(), damage=source.damage,
                       writes=source.writes(fold.state, until), usage=source.usage(fold.state, until),
                       git=source.worktrees)
        doc["following"] = source.following
        return doc

    def _current_statuses(self, fold: PanelFold) -> dict[str, str]:
        return member_statuses(fold, self.source.status)

    # ------------------------------------------------------------ watchers

    def open(self, last_id: int | None) -> asyncio.Queue[Message | None]:
        """A new watcher's queue, already holding what it needs to be current."""
        queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self.pump()  # the others first: the shared status baseline moves on below
        fold = self.fold()
        if fold is not None:
            fold.advance(self.source.events, self.source.durable)
            for message in self._catch_up(fold, last_id):
                queue.put_nowait(message)
        self._watchers.add(queue)
        return queue

    def _catch_up(self, fold: PanelFold, last_id: int | None) -> list[Message]:
        seq = fold.seq
        doc = self._document(fold)
        self._statuses = self._current_statuses(fold)
        missed = fold.entries_after(last_id) if last_id is not None and 0 <= last_id <= seq else None
        if missed is None or len(missed) > TIMELINE_WINDOW:
            return [_message("snapshot", seq, doc)]
        if last_id == seq:
            return [_message("status", seq, {"statuses": self._statuses})]
        doc["timeline"] = plain(missed)
        return [_message("team", seq, doc)]

    def close(self, queue: asyncio.Queue[Message | None]) -> None:
        """Forget a watcher whose stream ended."""
        self._watchers.discard(queue)

    def close_all(self) -> None:
        """End every open stream (the server is stopping, or a test drops connections)."""
        for queue in list(self._watchers):
            queue.put_nowait(None)
        self._watchers.clear()

    async def stream(self, queue: asyncio.Queue[Message | None]) -> AsyncIterator[Message]:
        """The messages of one watcher until its stream is closed."""
        try:
            while (message := await queue.get()) is not None:
                yield message
        finally:
            self.close(queue)

    # ------------------------------------------------------------ publishing

    def poke(self) -> None:
        """Something may have changed: publish on the next loop turn (coalesced), if anybody watches."""
        if not self._watchers or self._scheduled:
            return
        self._scheduled = True
        asyncio.get_running_loop().call_soon(self.pump)

    def pump(self) -> None:
        """Fold what is new and send each watcher what changed."""
        self._scheduled = False
        fresh = self._fold is None
        fold = self.fold()
        if fold is None or not self._watchers:
            return
        before = fold.seq
        change = fold.advance(self.source.events, self.source.durable)
        messages: list[Message] = []
        entries = fold.entries_after(before)
        # The Lead appeared after these watchers connected (they have nothing yet), or more
        # changes came at once than the fold keeps: a snapshot.
        if fresh or entries is None:
            doc = self._document(fold)
            self._statuses = self._current_statuses(fold)
            messages.append(_message("snapshot", fold.seq, doc))
        elif change == "team":
            doc = self._document(fold)
            doc["timeline"] = plain(entries)
            messages.append(_message("team", fold.seq, doc))
        elif change == "mail":
            delta = mail_delta(fold, log_length=len(self.source.events), entries=entries)
            delta["timeline"] = plain(entries)
            messages.append(_message("mail", fold.seq, delta))
        statuses = self._current_statuses(fold)
        if statuses != self._statuses:
            self._statuses = statuses
            messages.append(_message("status", fold.seq, {"statuses": statuses}))
        for message in messages:
            self.published += 1
            for queue in self._watchers:
                queue.put_nowait(message)
