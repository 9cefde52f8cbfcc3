"""The lease, epoch and work-desk protocol as a small state machine, checked exhaustively.

What is modelled is what :mod:`host_spec.host.store.postgres.work`,
:mod:`~host_spec.host.store.postgres.leases` and :mod:`host_spec.host.placement`
do, under the same names:

* the **Team lease** (the root's lease: ``holder``, ``epoch``, expired or not) and
  the **member lease** (``member:<session>``), each claimed by ``acquire`` (a free
  or expired lease, the epoch raised), kept by ``renew`` (the holder and epoch
  still match; an expired lease nobody claimed is renewed, as ``_RENEW`` does) and
  found ``lost`` by a renewal that no longer matches;
* the member's **log**, written only by the process holding the Team, every
  append fenced by the Team lease epoch (``SESSION_FENCED``);
* the **desk rows** (``dsh_work``): ``post`` (``queued``), ``take`` (``taken``,
  under the member lease epoch), ``finish`` (``done``), ``settle`` (``settled``),
  ``recover`` (a dead holder's model call ``queued`` again, its tool call ``done``
  with ``TOOL_OUTCOME_UNKNOWN``) and ``take_over`` (``withdrawn`` / ``settled``);
* the **Lead's view** (the Team holder: the Team epoch it believes it holds and
  the one call it waits for) and each **worker's view** (the member epoch it
  believes it holds, its calls in flight, and its cached copy of the member's
  log, the stand-in's ``stored``), whose refresh is two steps as in
  ``MemberRunner._stand_in``: read the rows after ``len(stored)``, then extend;
* the **scripted model**: its answer is the call id of the member's position,
  counted from the worker's cached log up to the call's ``seq`` (the number of
  assistant replies, as ``ScriptedModel.position`` does).

The environment may stop the database (an **outage**: every lease lapses), freeze
a process (it does nothing, and its leases lapse) and let it go again. A process
not holding the Team may take it over once its lease lapsed: it claims the root,
runs ``take_over`` (with the epoch rule) and cold-resumes (a ``tool/call`` without a
result is answered ``TOOL_OUTCOME_UNKNOWN``; a model call whose answer was never
recorded is asked again).

``rules`` switches the two guards of #38 on or off, so a test can show each is
needed: ``epoch`` (rows, member leases and answers bound to the Team epoch, and a
worker's cache rebuilt when the Team epoch changes) and ``dedupe`` (the stand-in's
extend adds only the rows past ``len(stored)``). What must hold in every reachable
state (:func:`violations`):

* ``recorded twice``: no ``tool/call`` id is in the log twice;
* ``effect twice``: no call's command ran twice;
* ``stale answer``: no answer was accepted on the desk for a row whose Team epoch
  is not the Team's epoch any more (a holder the Team moved on from).

:func:`explore` is a plain breadth-first search over every interleaving, within
the bounds of :class:`Bounds`; it returns the first violating state's trace.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

import attrs

__all__ = ["Bounds", "Result", "explore", "violations", "PROCESSES", "WORKERS"]

#: The Lead's process and two workers; any of them may hold the Team, the workers run the member.
PROCESSES = ("lead", "w1", "w2")
WORKERS = ("w1", "w2")
#: The member's script: two steps, each one tool call (ids ``1`` and ``2``).
STEPS = 2


@attrs.frozen(cache_hash=True)
class Lease:
    holder: str | None
    epoch: int
    expired: bool


@attrs.frozen(cache_hash=True)
class Row:
    """One ``dsh_work`` row: ``call`` is the tool call id of a tool row (0 for a model call)."""

    key: int
    kind: str  # "model" | "tool"
    call: int
    seq: int  # the member's log length when posted
    state: str  # "queued" | "taken" | "done" | "settled" | "withdrawn"
    holder: str | None
    epoch: int  # the member lease epoch it was taken under
    team_epoch: int
    result: int  # a model call's answer (the tool call id; -1: the script is exhausted), a tool call's 0


@attrs.frozen(cache_hash=True)
class Running:
    """A call in flight on a worker: ``phase`` start -> read -> ready -> ran.

    ``begin`` is ``len(stored)`` when its read ran and ``snapshot`` the rows the read
    returned (the log after ``begin``); ``answer`` what the call answered.
    """

    key: int
    phase: str
    begin: int
    snapshot: tuple[tuple[str, int], ...]
    answer: int


@attrs.frozen(cache_hash=True)
class Proc:
    frozen: bool
    team_epoch: int  # the Team epoch it believes it holds (0: none)
    fenced: bool  # it learnt it lost the Team (it stops)
    waiting: int  # the key of the row it waits for as the Team holder (0: none)
    pending_tool: int  # a tool call id recorded and not yet posted (0: none)
    member_epoch: int  # the member lease epoch it believes it holds (0: none)
    cache_epoch: int  # the Team epoch its cached log belongs to
    stored: tuple[tuple[str, int], ...]  # its cached copy of the member's log
    running: tuple[Running, ...]


@attrs.frozen(cache_hash=True)
class State:
    team: Lease
    member: Lease
    log: tuple[tuple[str, int], ...]  # ("reply", id), ("call", id), ("result", id); ("end", 0): the last reply
    rows: tuple[Row, ...]
    procs: tuple[Proc, ...]
    effects: tuple[int, ...]  # how often each tool call's command ran (index id - 1)
    stale_answers: int
    outages: int
    freezes: int
    takeovers: int
    claims: int


@attrs.frozen(cache_hash=True)
class Bounds:
    outages: int = 1
    freezes: int = 1
    takeovers: int = 1
    claims: int = 3  # member lease claims


@attrs.frozen(cache_hash=True)
class Result:
    states: int
    violation: str | None
    trace: list[str]


_IDLE = Proc(False, 0, False, 0, 0, 0, 0, (), ())


def initial() -> State:
    procs = tuple(attrs.evolve(_IDLE, team_epoch=1) if name == "lead" else _IDLE for name in PROCESSES)
    return State(Lease("lead", 1, False), Lease(None, 0, False), (), (), procs, (0,) * STEPS, 0, 0, 0, 0, 0)


def violations(state: State) -> list[str]:
    calls = [call for kind, call in state.log if kind == "call"]
    found = [f"recorded twice: tool/call {call}" for call in set(calls) if calls.count(call) > 1]
    found += [f"effect twice: command {index + 1} ran {n} times" for index, n in enumerate(state.effects) if n > 1]
    if state.stale_answers:
        found.append("stale answer: the desk accepted an answer for a Team epoch gone by")
    return found


def position(events: tuple[tuple[str, int], ...]) -> int:
    """``ScriptedModel.position``: the assistant replies in the log."""
    return sum(1 for kind, _ in events if kind == "reply")


def _set(state: State, name: str, proc: Proc) -> State:
    procs = list(state.procs)
    procs[PROCESSES.index(name)] = proc
    return attrs.evolve(state, procs=tuple(procs))


def _proc(state: State, name: str) -> Proc:
    return state.procs[PROCESSES.index(name)]


def _row(state: State, key: int) -> Row:
    return state.rows[key - 1]


def _put(state: State, row: Row) -> State:
    rows = list(state.rows)
    rows[row.key - 1] = row
    return attrs.evolve(state, rows=tuple(rows))


def _appendable(state: State, proc: Proc) -> bool:
    """The store's fencing of an append: the Team lease still carries the writer's epoch."""
    return state.team.epoch == proc.team_epoch and state.team.holder is not None


class Model:
    """The transitions (see the module docstring); ``epoch`` and ``dedupe`` are the guards under test."""

    def __init__(self, *, epoch: bool = True, dedupe: bool = True, bounds: Bounds = Bounds(),
                 runners: tuple[str, ...] = WORKERS, takers: tuple[str, ...] = PROCESSES) -> None:
        self.epoch = epoch
        self.dedupe = dedupe
        self.bounds = bounds
        #: Who may run the member (claim its lease) and who may take the Team over: a
        #: counterexample found with fewer is one of the whole model (its behaviours are a subset).
        self.runners = runners
        self.takers = takers

    # ------------------------------------------------------------ the Team holder (placement/lead.py)

    def _holder(self, state: State, name: str) -> Iterator[tuple[str, State]]:
        proc = _proc(state, name)
        if proc.frozen or proc.fenced or not proc.team_epoch:
            return
        if proc.pending_tool:
            yield from self._post(state, name, proc, "tool", proc.pending_tool)
            return
        if not proc.waiting:
            if ("end", 0) not in state.log:  # the member's turn goes on: ask the model for its next step
                yield from self._post(state, name, proc, "model", 0)
            return
        row = _row(state, proc.waiting)
        team_held = row.team_epoch == state.team.epoch and state.team.holder is not None
        if self.epoch and (not team_held or row.state in ("withdrawn", "settled")):
            yield f"{name}: outcome of row {row.key} says the Team moved on -> SESSION_FENCED", \
                _set(state, name, attrs.evolve(proc, fenced=True))
            return
        if row.state != "done":
            return
        if not _appendable(state, proc):
            yield f"{name}: append of row {row.key}'s answer refused -> SESSION_FENCED", \
                _set(state, name, attrs.evolve(proc, fenced=True))
            return
        settled = _put(state, attrs.evolve(row, state="settled"))
        if row.kind == "model":
            if row.result < 0:  # exhausted: the reply has no tool call, and the turn ends
                yield f"{name}: settle {row.key}, record the last reply; the member's turn ends", \
                    _set(attrs.evolve(settled, log=state.log + (("end", 0),)), name, attrs.evolve(proc, waiting=0))
                return
            log = state.log + (("reply", row.result), ("call", row.result))  # the checkpoint before the post
            yield (f"{name}: settle {row.key}, record reply and tool/call {row.result}",
                   _set(attrs.evolve(settled, log=log), name, attrs.evolve(proc, waiting=0, pending_tool=row.result)))
        else:
            log = state.log + (("result", row.call),)
            yield f"{name}: settle {row.key}, record tool/result {row.call}", \
                _set(attrs.evolve(settled, log=log), name, attrs.evolve(proc, waiting=0))

    def _post(self, state: State, name: str, proc: Proc, kind: str, call: int) -> Iterator[tuple[str, State]]:
        if self.epoch and not (state.team.holder == name and state.team.epoch == proc.team_epoch):
            yield f"{name}: post refused (not the Team's holder) -> SESSION_FENCED", \
                _set(state, name, attrs.evolve(proc, fenced=True))
            return
        key = len(state.rows) + 1
        row = Row(key, kind, call, len(state.log), "queued", None, 0, proc.team_epoch, 0)
        posted = attrs.evolve(state, rows=state.rows + (row,))
        yield f"{name}: post {kind} row {key}" + (f" (tool call {call})" if call else ""), \
            _set(posted, name, attrs.evolve(proc, waiting=key, pending_tool=0))

    # ------------------------------------------------------------ taking the Team over (store.resume)

    def _take_over(self, state: State, name: str) -> Iterator[tuple[str, State]]:
        proc = _proc(state, name)
        if proc.frozen or proc.team_epoch or state.takeovers >= self.bounds.takeovers:
            return
        if state.team.holder is not None and not state.team.expired:
            return
        epoch = state.team.epoch + 1
        taken = attrs.evolve(state, team=Lease(name, epoch, False), takeovers=state.takeovers + 1)
        if self.epoch:  # WorkDesk.take_over: close the older rows, fence the member's lease
            rows = tuple(attrs.evolve(r, state="settled" if r.state == "done" else "withdrawn")
                         if r.team_epoch < epoch and r.state in ("queued", "taken", "done") else r
                         for r in taken.rows)  # fmt: skip
            member = taken.member
            if member.holder is not None:
                member = Lease(None, member.epoch + 1, False)
            taken = attrs.evolve(taken, rows=rows, member=member)
        # the cold resume: a recorded tool call without a result is answered TOOL_OUTCOME_UNKNOWN
        log = taken.log
        results = {call for kind, call in log if kind == "result"}
        log += tuple(("result", call) for kind, call in taken.log if kind == "call" and call not in results)
        taken = attrs.evolve(taken, log=log)
        yield f"{name}: claim the Team (epoch {epoch}), take over, cold-resume", \
            _set(taken, name, attrs.evolve(proc, team_epoch=epoch, fenced=False, waiting=0, pending_tool=0))

    # ------------------------------------------------------------ a worker running the member (placement/runner.py)

    def _worker(self, state: State, name: str) -> Iterator[tuple[str, State]]:
        proc = _proc(state, name)
        if proc.frozen:
            return
        member = state.member
        holds = member.holder == name and member.epoch == proc.member_epoch
        if proc.member_epoch and not holds:  # renew finds the lease moved: lost, let go
            running = tuple(r for r in proc.running if r.phase == "ran")  # the rest are aborted
            yield f"{name}: member lease lost; let go (cache dropped)", _set(
                state, name, attrs.evolve(proc, member_epoch=0, stored=(), cache_epoch=0, running=running))
            return
        if holds and member.expired:
            yield f"{name}: renew the member lease", attrs.evolve(state, member=attrs.evolve(member, expired=False))
        if not proc.member_epoch and state.claims < self.bounds.claims and (member.holder is None or member.expired):
            if any(self._wanted(state, r) for r in state.rows):
                yield from self._acquire(state, name, proc)
        if holds and not member.expired:
            queued = [r for r in state.rows if r.state == "queued" and self._takeable(state, r)]
            if queued:
                yield from self._take(state, name, proc, queued)
        for index, run in enumerate(proc.running):
            yield from self._step(state, name, proc, index, run)

    def _wanted(self, state: State, row: Row) -> bool:
        current = not self.epoch or (row.team_epoch == state.team.epoch and state.team.holder is not None)
        return row.state in ("queued", "taken") and current

    def _takeable(self, state: State, row: Row) -> bool:
        return not self.epoch or (row.team_epoch == state.team.epoch and state.team.holder is not None)

    def _acquire(self, state: State, name: str, proc: Proc) -> Iterator[tuple[str, State]]:
        epoch = state.member.epoch + 1
        claimed = attrs.evolve(state, member=Lease(name, epoch, False), claims=state.claims + 1)
        rows = []
        for row in claimed.rows:  # recover what a dead holder left taken
            if row.state == "taken" and row.epoch != epoch:
                row = attrs.evolve(row, state="queued", holder=None, epoch=0) if row.kind == "model" else \
                    attrs.evolve(row, state="done")  # TOOL_OUTCOME_UNKNOWN
            rows.append(row)
        yield f"{name}: acquire the member lease (epoch {epoch}), recover", _set(
            attrs.evolve(claimed, rows=tuple(rows)), name, attrs.evolve(proc, member_epoch=epoch))

    def _take(self, state: State, name: str, proc: Proc, queued: list[Row]) -> Iterator[tuple[str, State]]:
        taken = state
        running = list(proc.running)
        cache_epoch, stored = proc.cache_epoch, proc.stored
        for row in queued:
            taken = _put(taken, attrs.evolve(row, state="taken", holder=name, epoch=proc.member_epoch))
            if self.epoch:
                if row.team_epoch < cache_epoch:
                    continue  # a row of a Team epoch gone by: never run
                if row.team_epoch > cache_epoch:
                    cache_epoch, stored = row.team_epoch, ()  # the Team changed holder: rebuild from the store
            running.append(Running(row.key, "start", 0, (), 0))  # model and tool calls both read the log first
        keys = ", ".join(str(r.key) for r in queued)
        yield f"{name}: take rows {keys}", _set(
            taken, name, attrs.evolve(proc, running=tuple(running), cache_epoch=cache_epoch, stored=stored))

    def _step(self, state: State, name: str, proc: Proc, index: int, run: Running) -> Iterator[tuple[str, State]]:
        row = _row(state, run.key)
        running = list(proc.running)
        if run.phase in ("start", "read", "ready") and row.state == "withdrawn":
            del running[index]  # still_mine: withdrawn, the call is aborted
            yield f"{name}: row {row.key} withdrawn, abort it", _set(state, name, attrs.evolve(proc, running=tuple(running)))
            return
        if run.phase == "start":
            if len(proc.stored) >= row.seq:
                running[index] = attrs.evolve(run, phase="ready")
                yield f"{name}: row {row.key} finds its cached log long enough", _set(
                    state, name, attrs.evolve(proc, running=tuple(running)))
                return
            begin = len(proc.stored)
            if len(proc.running) == 1:
                # Alone on this worker, reading and extending at once is the same: between the two
                # steps only this worker's private cache differs, and no other call of it can touch it.
                running[index] = attrs.evolve(run, phase="ready")
                yield f"{name}: row {row.key} reads the member's log into its cache", _set(
                    state, name, attrs.evolve(proc, stored=proc.stored + state.log[begin:], running=tuple(running)))
                return
            running[index] = attrs.evolve(run, phase="read", begin=begin, snapshot=state.log[begin:])
            yield f"{name}: row {row.key} reads the member's log", _set(state, name, attrs.evolve(proc, running=tuple(running)))
        elif run.phase == "read":
            known = len(proc.stored)  # another call of the member may have extended it since this one read
            if self.dedupe:  # row i of the snapshot is seq begin + i + 1: keep only those past ``known``
                fresh = tuple(event for offset, event in enumerate(run.snapshot) if run.begin + offset + 1 > known)
            else:
                fresh = run.snapshot
            running[index] = attrs.evolve(run, phase="ready", snapshot=())
            yield f"{name}: row {row.key} extends its cached log", _set(
                state, name, attrs.evolve(proc, stored=proc.stored + fresh, running=tuple(running)))
        elif run.phase == "ready":
            effects = list(state.effects)
            if row.kind == "model":
                seen = position(proc.stored[: row.seq])
                answer = seen + 1 if seen < STEPS else -1
                what = f"answers tool call {answer}" if answer > 0 else "answers: script exhausted"
            else:
                effects[row.call - 1] += 1
                answer, what = 0, f"runs command {row.call}"
            running[index] = attrs.evolve(run, phase="ran", answer=answer)
            yield f"{name}: row {row.key} {what}", _set(
                attrs.evolve(state, effects=tuple(effects)), name, attrs.evolve(proc, running=tuple(running)))
        else:  # ran: finish
            del running[index]
            member_ok = row.state == "taken" and row.holder == name and row.epoch == proc.member_epoch \
                and state.member.holder == name and state.member.epoch == row.epoch
            team_ok = row.team_epoch == state.team.epoch and state.team.holder is not None
            after = _set(state, name, attrs.evolve(proc, running=tuple(running)))
            if member_ok and (team_ok or not self.epoch):
                after = _put(after, attrs.evolve(row, state="done", result=run.answer))
                if not team_ok:
                    after = attrs.evolve(after, stale_answers=after.stale_answers + 1)
                yield f"{name}: finish row {row.key} (stored)", after
            else:
                yield f"{name}: finish row {row.key} refused", after

    # ------------------------------------------------------------ the environment

    def _environment(self, state: State) -> Iterator[tuple[str, State]]:
        if state.outages < self.bounds.outages:
            yield "outage: the database stops; every lease lapses", attrs.evolve(state, 
                team=attrs.evolve(state.team, expired=state.team.holder is not None),
                member=attrs.evolve(state.member, expired=state.member.holder is not None), outages=state.outages + 1)
        for name in PROCESSES:
            proc = _proc(state, name)
            if not proc.frozen and state.freezes < self.bounds.freezes:
                yield f"freeze {name}", _set(attrs.evolve(state, freezes=state.freezes + 1), name, attrs.evolve(proc, frozen=True))
            if proc.frozen:
                yield f"thaw {name}", _set(state, name, attrs.evolve(proc, frozen=False))
                if state.team.holder == name and not state.team.expired:
                    yield f"{name}'s Team lease lapses (frozen)", attrs.evolve(state, team=attrs.evolve(state.team, expired=True))
                if state.member.holder == name and not state.member.expired:
                    yield f"{name}'s member lease lapses (frozen)", attrs.evolve(state, 
                        member=attrs.evolve(state.member, expired=True))
            elif state.team.holder == name and state.team.expired and state.team.epoch == proc.team_epoch:
                yield f"{name}: renew the Team lease", attrs.evolve(state, team=attrs.evolve(state.team, expired=False))

    def successors(self, state: State) -> Iterator[tuple[str, State]]:
        yield from self._environment(state)
        for name in PROCESSES:
            yield from self._holder(state, name)
            if name in self.takers:
                yield from self._take_over(state, name)
        for name in self.runners:
            yield from self._worker(state, name)


def explore(model: Model, *, limit: int = 2_000_000, only: str | None = None) -> Result:
    """Breadth-first over every reachable state; the first violation's trace, or none.

    ``only``: count only the violations whose text starts with it (``"recorded twice"``).
    """
    start = initial()
    parents: dict[State, tuple[State | None, str]] = {start: (None, "start")}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        found = [v for v in violations(state) if only is None or v.startswith(only)]
        if found:
            trace: list[str] = []
            at: State | None = state
            while at is not None:
                parent, label = parents[at]
                trace.append(label)
                at = parent
            return Result(len(parents), found[0], trace[::-1])
        for label, following in model.successors(state):
            if following not in parents:
                if len(parents) >= limit:
                    raise RuntimeError(f"more than {limit} states: the bounds are too wide")
                parents[following] = (state, label)
                queue.append(following)
    return Result(len(parents), None, [])


def replay(model: Model, schedule: list[str]) -> tuple[State, list[str]]:
    """Follow ``schedule`` (transition labels, in order) from the start; the state reached and the labels taken.

    Stops at the first label that is not an enabled transition there (so a guard
    that forbids a step shows as a shorter trace).
    """
    state, taken = initial(), []
    for label in schedule:
        following = dict(model.successors(state)).get(label)
        if following is None:
            break
        state = following
        taken.append(label)
    return state, taken
