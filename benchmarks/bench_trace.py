"""Trace export: a long run's logs as OTLP JSON, against merely reading those logs.

T1: ``dsh trace export``'s work (``export_trace`` with the Team contributor: read the
    logs, build the spans, fold the Team records into span events and receipt
    links, encode the document) per event, on a run twice as long over a run of
    ``TURNS`` turns -- a Lead whose every turn has a model call and a
    ``send_message`` call (the message queued, delivered and read) and a teammate
    that reads every message. Goal: at most 1.3, flat in the run's length (one
    pass over the logs, never a re-scan per span or per message). The seconds of
    the longer export (``T1s``, goal: under 5 s) and of merely reading its logs are printed.

The two runs' exports alternate (every other round backwards) and T1 is the
median of the rounds' ratios, so a moment of load on the shared machine moves
one round, not the figure; the printed seconds are the best of the rounds.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsh_team.views.trace import contribute  # noqa: E402
from host_spec.events import Cause  # noqa: E402
from host_spec.host.cli.extensions import StoreReader  # noqa: E402
from host_spec.host.store.jsonl import JsonlStore  # noqa: E402
from host_spec.host.store.session import NullObserver  # noqa: E402
from host_spec.host.store.sessions import SessionStore  # noqa: E402
from host_spec.trace_export import export_trace  # noqa: E402

TURNS = 2_000
ROUNDS = 5
LEAD, MATE = "lead", "mate"


def _write(data: Path, turns: int) -> int:
    async def run() -> int:
        clock = itertools.count(1_000)
        store = SessionStore(JsonlStore(data), NullObserver(), clock=lambda: next(clock))
        lead = store.create(LEAD)
        mate = store.create(MATE, parent_session=LEAD)
        member = {"id": MATE, "name": "mate", "description": "d", "provider": "spawn", "context": "fresh"}
        for phase in ("provisioning", "active"):
            lead.append("team/member", {"version": 2, "team_id": LEAD, "member": {**member, "phase": phase}})
        for turn in range(1, turns + 1):
            call = f"call-{turn}"
            message_id = f"team-message-{turn}"
            lead.append("turn/start", {"turn": turn})
            lead.append("step/start", {"turn": turn, "step": 1})
            lead.append("assistant/message", {"turn": turn, "step": 1, "content": [],
                                              "usage": {"input_tokens": 900, "output_tokens": 40}, "model": "openai:m"})
            lead.append("tool/call", {"turn": turn, "step": 1, "call_id": call, "name": "send_message", "arguments": "{}"})
            body = {"id": message_id, "sender_id": LEAD, "sender_name": "lead", "target_id": MATE,
                    "content": [{"type": "text", "text": "next"}]}
            by_call = Cause(agent_id=LEAD, call_id=call)
            lead.append("team/message/queued", {"version": 2, "team_id": LEAD, "message": body}, cause=by_call)
            receipt = {"version": 2, "team_id": LEAD, "message_id": message_id, "target_id": MATE}
            lead.append("team/message/delivered", receipt, cause=by_call)
            lead.append("tool/result", {"turn": turn, "step": 1, "call_id": call, "name": "send_message", "content": []})
            lead.append("step/end", {"turn": turn, "step": 1})
            lead.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            source = {"kind": "team-message", "team_id": LEAD, "message_id": message_id}
            mate.append("turn/start", {"turn": turn})
            mate.append("user/message", {"id": message_id, "content": [], "source": source})
            mate.append("assistant/message", {"turn": turn, "step": 1, "content": []})
            mate.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            lead.append("team/message/read", receipt, cause=Cause(agent_id=MATE))
        count = len(lead.events) + len(mate.events)
        for session in (lead, mate):
            await store.dispose(session)
        return count

    return asyncio.run(run())


def _export(reader: StoreReader) -> tuple[float, int]:
    """One export of the Lead's run: ``(seconds, spans)``."""
    started = time.perf_counter()
    spans = export_trace(reader, LEAD, contributors=[("team", contribute)]).spans
    return time.perf_counter() - started, spans


def _read_seconds(reader: StoreReader) -> float:
    started = time.perf_counter()
    for session_id in reader.list_ids():
        reader.read(session_id, salvage=True)
    return time.perf_counter() - started


def run() -> list[tuple[str, float, float]]:
    with tempfile.TemporaryDirectory() as short_tmp, tempfile.TemporaryDirectory() as long_tmp:
        short_events, events = _write(Path(short_tmp), TURNS), _write(Path(long_tmp), 2 * TURNS)
        short, long = StoreReader(JsonlStore(Path(short_tmp))), StoreReader(JsonlStore(Path(long_tmp)))
        rounds: list[tuple[float, float]] = []  # (short seconds, long seconds)
        for number in range(ROUNDS):  # side by side, every other round backwards: the machine is shared
            if number % 2 == 0:
                (short_s, _), (long_s, spans) = _export(short), _export(long)
            else:
                (long_s, spans), (short_s, _) = _export(long), _export(short)
            rounds.append((short_s, long_s))
        read_s = min(_read_seconds(long) for _ in range(ROUNDS))
    ratio = statistics.median((long_s / events) / (short_s / short_events) for short_s, long_s in rounds)
    short_s, export_s = min(r[0] for r in rounds), min(r[1] for r in rounds)
    print(f"   T1: {events} events -> {spans} spans: export {export_s:.2f} s (reading the logs: {read_s:.2f} s); "
          f"{short_events} events: {short_s:.2f} s (per-event ratio: median of {ROUNDS} rounds)")
    return [("T1", ratio, 1.3), ("T1s", export_s, 5)]


if __name__ == "__main__":
    for line in run():
        print(*line)
