"""A torn final line at every byte offset of a log's last lines: dropped with a warning, never a crash.

For each session log of a finished demo run and each of its last ``lines``
lines, every cut inside that line (from its first byte to the missing newline)
is written as the log's whole content. The store must read exactly the events
of the complete lines before the cut, a resume must repair the file to that
prefix, and a Lead log must still fold without a Team failure. A few cuts per
line also get a real ``dsh resume`` of the whole data dir and the exactly-once
checks.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from crash_sweep import Demo, spread
from exactly_once import violations
from figures import Figures

from dsh_team.core.fold import replay
from host_spec.errors import DshError
from host_spec.host.store.jsonl import JsonlStore

__all__ = ["torn_sweep"]


def _cut_problems(store: JsonlStore, session_id: str, path: Path, data: bytes, cut: int, start: int,
                  expected: int, lead: bool) -> list[str]:  # fmt: skip
    path.write_bytes(data[:cut])
    try:
        header, events = store.read(session_id)
    except DshError as error:
        return [f"read failed: {error.code}: {error}"]
    problems = []
    if len(events) != expected:
        problems.append(f"read {len(events)} events, expected {expected}")
    if lead and header.parent_session is None and replay(events, session_id).failure is not None:
        problems.append("the Team stream failed after dropping a torn tail")
    try:
        log, resumed = store.resume(session_id)
        log.close()
    except DshError as error:
        return [*problems, f"resume failed: {error.code}: {error}"]
    if len(resumed) != expected or path.stat().st_size != start:
        problems.append(f"resume kept {path.stat().st_size} bytes / {len(resumed)} events, expected {start} / {expected}")
    return problems


def torn_sweep(demo: Demo, *, lines: int, stride: int = 1, resumes_per_line: int = 1) -> Figures:
    """Cut each of the last ``lines`` lines of every log at every ``stride``-th byte (see the module docstring)."""
    figures = Figures("torn final line")
    _, clean = demo.writes_of_run()
    source = JsonlStore(clean)
    for session_id in source.list_ids():
        original = source.path(session_id).read_bytes()
        rows = original.splitlines(keepends=True)
        lead = source.read(session_id)[0].parent_session is None
        scratch = demo.scratch / "torn"
        shutil.rmtree(scratch, ignore_errors=True)
        store = JsonlStore(scratch)
        path = store.path(session_id)
        path.parent.mkdir(parents=True)
        for back in range(1, min(lines, len(rows) - 1) + 1):
            index = len(rows) - back  # the line that is torn; every later line is gone
            start = sum(len(row) for row in rows[:index])
            body = len(rows[index]) - 1  # without its newline
            data = original[: start + body + 1]
            expected = index - 1  # complete event lines before the torn one
            cuts = list(range(start + 1, start + body + 1, stride))
            if cuts[-1] != start + body:
                cuts.append(start + body)  # the whole line but its newline
            for cut in cuts:
                problems = _cut_problems(store, session_id, path, data, cut, start, expected, lead)
                figures.record(f"{session_id} line {index + 1} cut at byte {cut - start}/{body + 1}", problems)
            for cut in [cuts[i - 1] for i in spread(len(cuts), resumes_per_line)] if resumes_per_line else []:
                whole = demo.scratch / "torn-run"
                shutil.rmtree(whole, ignore_errors=True)
                shutil.copytree(clean, whole)
                JsonlStore(whole).path(session_id).write_bytes(data[:cut])
                result = demo.resume(whole)
                problems = [] if result.returncode in (0, 1) and "Traceback" not in result.stderr else [
                    f"dsh resume exited {result.returncode}: {result.stderr.strip()[-300:]}"]
                figures.record(f"{session_id} line {index + 1} cut at {cut - start}, dsh resume",
                               problems or violations(whole))  # fmt: skip
    return figures
