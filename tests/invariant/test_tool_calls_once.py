"""A tool call id is recorded once per log: the veto, on the JSONL store and on a real PostgreSQL server.

Real host, real stores; the oracle is the stored log read back by a fresh store
handle (what a resume or the reliability checker would see).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from kit_postgres import shared_server

from host_spec import hookimpl
from host_spec.errors import InvariantError
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.postgres import PostgresStore
from host_spec.records import Violation

from dsh_team_invariant.tool_calls import RULE

NAME = "dsh-team-invariant"


class _Backend:
    """Where the host's logs live, and how a fresh handle reads one back."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.where = str(tmp_path / "data") if kind == "jsonl" else shared_server().new_database()

    def stored(self, session_id: str) -> list[tuple[str, Any]]:
        store: Any = JsonlStore(Path(self.where)) if self.kind == "jsonl" else PostgresStore(self.where, retry_seconds=5)
        try:
            _, events = store.read(session_id)
        finally:
            if self.kind != "jsonl":
                store.close()
        return [(event.type, event.value().get("call_id")) for event in events]


@pytest.fixture(params=["jsonl", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> _Backend:
    return _Backend(str(request.param), tmp_path)


class VetoNext:
    """Another plugin's veto: refuses the next ``tool/call`` once (so the invariant's stage must not count it)."""

    def __init__(self) -> None:
        self.armed = False

    @hookimpl
    def dsh_pre_append(self, session: Any, event: Any) -> Violation | None:
        if self.armed and event.type == "tool/call":
            self.armed = False
            return Violation(reason="not now", rule="test")
        return None


@asynccontextmanager
async def open_host(backend: _Backend, *extra: tuple[str, object]) -> AsyncIterator[Host]:
    host = await Host.open(backend.where, None, ScriptedModel.from_mapping({}), extra_plugins=list(extra))
    try:
        host.plugins.load(NAME, {})
        yield host
    finally:
        await host.close()


def call(call_id: str) -> dict[str, Any]:
    return {"call_id": call_id, "name": "bash", "arguments": '{"command": "true"}'}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "call_id": call_id, "name": "bash", "content": [{"type": "text", "text": "ok"}]}


Append = Callable[[str, dict[str, Any]], Any]


class TestOnceInALog:
    async def test_a_second_record_of_one_call_is_refused(self, backend: _Backend) -> None:
        async with open_host(backend) as host:
            session = await host.create_session()
            session.append("tool/call", call("c-1"))
            session.append("tool/result", result("c-1"))
            with pytest.raises(InvariantError) as info:
                session.append("tool/call", call("c-1"))
            assert (info.value.code, info.value.plugin) == ("INVARIANT", NAME)
            assert "session event 3 records tool/call c-1 a second time" in str(info.value)
            assert f"(rule {RULE})" in str(info.value)
            session.append("tool/call", call("c-2"))  # another id is recorded as usual
            # A server that numbers each response's calls from call_0 again reuses an id for another call:
            session.append("tool/call", {**call("c-1"), "arguments": '{"command": "ls"}'})
            await session.flush()
            sid = session.id
        assert backend.stored(sid) == [("tool/call", "c-1"), ("tool/result", "c-1"), ("tool/call", "c-2"),
                                       ("tool/call", "c-1")]

    async def test_a_resumed_log_refuses_an_id_its_stored_history_holds(self, backend: _Backend) -> None:
        async with open_host(backend) as host:
            session = await host.create_session()
            session.append("turn/start", {"turn": 1})
            session.append("tool/call", {"name": "bash"})  # no id: the scan passes it by
            session.append("tool/call", call("c-1"))
            sid = session.id
        async with open_host(backend) as host:  # a new host (another process): the stored log is all there is
            session = await host.resume_session(sid)
            with pytest.raises(InvariantError, match=RULE):
                session.append("tool/call", call("c-1"))
            session.append("tool/result", result("c-1"))  # the call's first result is fine
        assert backend.stored(sid) == [("turn/start", None), ("tool/call", None), ("tool/call", "c-1"),
                                       ("tool/result", "c-1")]

    async def test_the_ledger_is_carried_across_activations_in_one_host(self, backend: _Backend) -> None:
        async with open_host(backend) as host:
            session = await host.create_session()
            session.append("tool/call", call("c-1"))
            await host.release_session(session)
            session = await host.resume_session(session.id)  # woken: the carried ledger continues
            session.append("tool/call", call("c-2"))
            for call_id in ("c-1", "c-2"):
                with pytest.raises(InvariantError, match=RULE):
                    session.append("tool/call", call(call_id))
            await host.release_session(session)
            session = await host.resume_session(session.id)
            with pytest.raises(InvariantError, match=RULE):
                session.append("tool/call", call("c-2"))

    async def test_a_call_another_plugin_vetoed_was_never_recorded(self, backend: _Backend) -> None:
        veto = VetoNext()
        async with open_host(backend, ("veto-next", veto)) as host:
            session = await host.create_session()
            veto.armed = True
            with pytest.raises(InvariantError, match="not now"):
                session.append("tool/call", call("c-1"))
            session.append("tool/call", call("c-1"))  # the refused record left no trace: this is its first
            veto.armed = True
            with pytest.raises(InvariantError, match="not now"):
                session.append("tool/call", call("c-2"))
            session.append("turn/start", {"turn": 1})  # another event now holds the refused one's seq
            session.append("tool/call", call("c-2"))
            with pytest.raises(InvariantError, match=RULE):
                session.append("tool/call", call("c-2"))
            await session.flush()
            sid = session.id
        assert backend.stored(sid) == [("tool/call", "c-1"), ("turn/start", None), ("tool/call", "c-2")]


class TestWhatIsJudged:
    async def test_a_fork_may_record_an_id_of_its_inherited_prefix(self, backend: _Backend) -> None:
        async with open_host(backend) as host:
            parent = await host.create_session()
            parent.append("tool/call", call("c-1"))
            child = await host.create_session(parent_session=parent.id, seed=list(parent.events))
            child.append("tool/call", call("c-1"))  # the seed is the parent's history, not the child's
            with pytest.raises(InvariantError, match=RULE):
                child.append("tool/call", call("c-1"))

    async def test_records_without_a_readable_id_are_left_to_the_host(self, tmp_path: Path) -> None:
        async with open_host(_Backend("jsonl", tmp_path)) as host:
            session = await host.create_session()
            session.append("tool/call", {"name": "bash"})  # no call id: nothing to compare
            session.append("tool/call", [1, 2])  # not an object
            session.append("tool/call", {"name": "bash"})
            assert session.last_seq == 3
            quiet = await host.create_session()
            quiet.append("turn/start", {"turn": 1})
            await host.release_session(quiet)  # no tool record: it never had a ledger to carry
            quiet = await host.resume_session(quiet.id)
            quiet.append("tool/call", call("c-1"))
            with pytest.raises(InvariantError, match=RULE):
                quiet.append("tool/call", call("c-1"))
