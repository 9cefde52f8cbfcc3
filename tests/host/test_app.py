"""The reference host: hook order, vetoes, quiescence, resume and shutdown (real sessions, real JSONL)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import structlog

from host_spec import hookimpl
from host_spec.errors import InvariantError, ModelError, PluginError, ServiceNotFoundError, SessionNotFoundError
from host_spec.events import EventType, SubagentDescriptor
from host_spec.host.app import Host, resolve_model
from host_spec.host.runs import agent_name
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.plugins.profiles import PluginEntry, Profile
from host_spec.host.store.jsonl import JsonlStore
from host_spec.records import Violation


def model(steps: list[dict[str, Any]] | None = None) -> ScriptedModel:
    return ScriptedModel.from_mapping({"lead": steps or [{"text": "done"}]})


class Recorder:
    """Records every hook the host calls (only kinds, agent/session names)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.veto_session = self.veto_agent = False
        self.veto_type: str | None = None

    @hookimpl
    def dsh_session_created(self, session: Any) -> None:
        self.calls.append(("session_created", session.id))
        if self.veto_session:
            raise PluginError("no sessions today")

    @hookimpl
    def dsh_session_disposed(self, session: Any) -> None:
        self.calls.append(("session_disposed", session.id))

    @hookimpl
    def dsh_agent_created(self, agent: Any) -> None:
        self.calls.append(("agent_created", agent.name))
        if self.veto_agent:
            raise PluginError("no agents today")

    @hookimpl
    def dsh_agent_session_start(self, agent: Any, source: str) -> None:
        self.calls.append(("session_start", source))

    @hookimpl
    def dsh_agent_status(self, status: str) -> None:
        self.calls.append(("status", status))

    @hookimpl
    def dsh_agent_turn_end(self, turn: int, reason: dict[str, Any]) -> None:
        self.calls.append(("turn_end", turn, reason["kind"]))

    @hookimpl
    def dsh_agent_disposed(self, agent: Any) -> None:
        self.calls.append(("agent_disposed", agent.name))

    @hookimpl
    def dsh_session_event(self, event: Any) -> None:
        self.calls.append(("event", event.type))

    @hookimpl
    def dsh_session_flushed(self, durable_seq: int) -> None:
        self.calls.append(("flushed", durable_seq))

    @hookimpl
    def dsh_pre_append(self, event: Any) -> Violation | None:
        return Violation(f"{event.type} is forbidden") if event.type == self.veto_type else None

    def kinds(self, *keep: str) -> list[tuple[Any, ...]]:
        return [call for call in self.calls if call[0] in keep]


async def open_host(tmp_path: Path | None, recorder: Recorder, steps: list[dict[str, Any]] | None = None) -> Host:
    return await Host.open(tmp_path, None, model(steps), extra_plugins=[("recorder", recorder)])


class TestLifecycle:
    async def test_hook_order_of_a_run(self, tmp_path: Path) -> None:
        """A run announces the session, creates and drives the agent; close disposes both."""
        recorder = Recorder()
        host = await open_host(tmp_path, recorder)
        agent = await host.run("hello")
        assert agent.status == "idle" and agent.name == "lead"
        assert agent.session.durable_seq == agent.session.last_seq  # quiesce flushed
        await host.dispose_agent(agent)
        assert host.agents.list() == [] and host.sessions.list() == ()
        await host.close()
        await host.close()  # idempotent
        lifecycle = recorder.kinds("session_created", "agent_created", "session_start", "status", "turn_end",
                                   "agent_disposed", "session_disposed")
        assert lifecycle == [
            ("session_created", agent.id),
            ("agent_created", "lead"),
            ("session_start", "startup"),
            ("status", "running"),
            ("turn_end", 1, "completed"),
            ("status", "idle"),
            ("agent_disposed", "lead"),
            ("session_disposed", agent.id),
        ]
        events = [call[1] for call in recorder.kinds("event")]
        assert events[0] == EventType.INBOX_SPLICED and events[-1] == EventType.TURN_END
        assert recorder.kinds("flushed")[-1] == ("flushed", len(events))
        assert JsonlStore(tmp_path).exists(agent.id)

    async def test_session_veto_releases_the_session(self) -> None:
        """A vetoed ``dsh_session_created`` aborts the run and still fires ``dsh_session_disposed``."""
        recorder = Recorder()
        recorder.veto_session = True
        host = await open_host(None, recorder)
        with pytest.raises(PluginError, match="no sessions today"):
            await host.run("hello")
        assert host.sessions.list() == () and host.agents.list() == []
        await host.close()
        assert [call[0] for call in recorder.calls] == ["session_created", "session_disposed"]

    async def test_agent_veto_releases_the_session(self) -> None:
        """A vetoed ``dsh_agent_created`` rolls the agent back and releases its session."""
        recorder = Recorder()
        recorder.veto_agent = True
        host = await open_host(None, recorder)
        with pytest.raises(PluginError, match="no agents today"):
            await host.run("hello")
        assert host.sessions.list() == () and host.agents.list() == []
        await host.close()
        assert [call[0] for call in recorder.calls] == ["session_created", "agent_created", "session_disposed"]

    async def test_pre_append_veto_reaches_append(self) -> None:
        """A plugin's violation makes ``append`` raise ``InvariantError`` and writes nothing."""
        recorder = Recorder()
        recorder.veto_type = "demo/forbidden"
        host = await open_host(None, recorder)
        session = await host.create_session("s1")
        with pytest.raises(InvariantError, match='"recorder": demo/forbidden is forbidden'):
            session.append("demo/forbidden", {})
        session.append("demo/allowed", {"x": 1})
        assert [event.type for event in session.events] == ["demo/allowed"]
        await host.close()

    async def test_failed_open_unloads_what_was_loaded(self) -> None:
        """A plugin failing during ``open`` leaves nothing loaded and raises."""
        unloaded: list[str] = []

        class Tracks:
            @hookimpl
            def dsh_plugin_unload(self) -> None:
                unloaded.append("tracks")

        profile = Profile(name="p", plugins=(PluginEntry("subagent", {"bogus": 1}),))
        with pytest.raises(Exception, match="bogus"):
            await Host.open(None, profile, model(), extra_plugins=[("tracks", Tracks())])
        assert unloaded == ["tracks"]

    async def test_unannounced_sessions_are_released_silently(self) -> None:
        """A session created behind the host's back is flushed and closed, with no disposal hook."""
        recorder = Recorder()

        host = await open_host(None, recorder)
        session = host.sessions.create("raw")
        await host.close()
        assert not session.live
        assert recorder.kinds("session_disposed") == []

    async def test_close_unloads_plugins_before_disposing_agents(self) -> None:
        """``async with`` closes the host: plugins unload first (teardown settles their work),
        then live agents and sessions are disposed without hooks."""
        recorder = Recorder()
        async with await open_host(None, recorder) as host:
            agent = await host.run("hi")
        assert host.agents.list() == [] and agent.disposed and not agent.session.live
        assert host.plugins.names() == []
        assert recorder.kinds("agent_disposed", "session_disposed") == []


    async def test_close_goes_on_after_a_failure_and_reports_it(self, tmp_path: Path) -> None:
        """One failing release does not leave the other sessions unflushed and locked; the error surfaces."""
        host = await Host.open(tmp_path, None, model())
        first = host.start_agent(await host.create_session("one"), name="lead")
        second = host.start_agent(await host.create_session("two"), name="lead")
        first.session.append("note/x", {})
        second.session.append("note/x", {})
        real = host.sessions.dispose

        async def failing(session: Any) -> None:
            await real(session)  # released for real, then the failure is reported
            if session.id == "two":
                raise OSError(5, "I/O error")

        host.sessions.dispose = failing  # type: ignore[method-assign]
        with pytest.raises(OSError, match="I/O error"):
            await host.close()
        assert not first.session.live and not second.session.live and host.agents.list() == []
        store = JsonlStore(tmp_path)
        for session_id in ("one", "two"):  # both flushed, both locks released
            store.resume(session_id)[0].close()
            assert [event.type for event in store.read(session_id)[1]][-1] == "note/x"

    async def test_unannounced_session_failure_is_reported_after_the_rest(self) -> None:
        """A failing release of a bare session is raised once every other session was released."""
        host = await Host.open(None, None, model())
        bare = host.sessions.create("bare")
        other = host.sessions.create("other")
        real = host.sessions.dispose

        async def failing(session: Any) -> None:
            await real(session)
            if session is bare:
                raise RuntimeError("flush failed")

        host.sessions.dispose = failing  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="flush failed"):
            await host.close()
        assert not other.live


class TestServices:
    async def test_service_lookup(self) -> None:
        """``service`` returns what a plugin provided for a type; absent types raise or find ``None``."""

        class Thing:
            pass

        class Other:
            pass

        thing = Thing()

        class Provider:
            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                ctx.provide(Thing, thing)

        host = await Host.open(None, None, model(), extra_plugins=[("p", Provider())])
        assert host.service(Thing) is thing and host.find_service(Thing) is thing
        assert host.find_service(Other) is None
        with pytest.raises(ServiceNotFoundError) as info:
            host.service(Other)
        assert info.value.code == "SERVICE_NOT_FOUND" and "Other" in str(info.value)
        await host.close()
        assert host.find_service(Thing) is None

    async def test_call_soon_runs_later_and_quiescence_waits(self) -> None:
        """``call_soon`` runs after the current call; awaitable results are awaited by quiesce."""
        order: list[str] = []

        async def later() -> None:
            await asyncio.sleep(0.01)
            order.append("task done")

        host = await Host.open(None, None, model())
        host.call_soon(lambda: order.append("soon"))
        host.call_soon(later)
        order.append("now")
        await host.quiesce()
        order.append("quiet")
        await host.close()
        assert order == ["now", "soon", "task done", "quiet"]

    async def test_call_soon_failures_are_logged(self) -> None:
        """A failing callback or task is logged, not raised."""

        async def broken() -> None:
            raise ValueError("task broke")

        host = await Host.open(None, None, model())
        with structlog.testing.capture_logs() as logs:
            host.call_soon(lambda: 1 / 0)
            host.call_soon(broken)
            await host.quiesce()
        await host.close()
        assert [entry["event"] for entry in logs] == ["host.call_soon_failed", "host.call_soon_failed"]

    async def test_close_cancels_pending_callback_tasks(self) -> None:
        """Tasks started by ``call_soon`` are cancelled on close."""
        started, outcome = asyncio.Event(), []

        async def forever() -> None:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                outcome.append("cancelled")
                raise
            outcome.append("finished")  # pragma: no cover - only if close failed to cancel

        host = await Host.open(None, None, model())
        host.call_soon(forever)
        await asyncio.wait_for(started.wait(), 10)
        await host.close()
        assert outcome == ["cancelled"]


class TestResume:
    async def test_resume_continues_a_stored_root(self, tmp_path: Path) -> None:
        """A stored root resumes as ``lead`` with source ``resume`` in a new host."""
        recorder = Recorder()
        host = await open_host(tmp_path, Recorder())
        agent = await host.run("hi")
        await host.close()
        again = await open_host(tmp_path, recorder)
        resumed = await again.resume(agent.id)
        assert resumed.name == "lead" and resumed.session.last_seq == agent.session.last_seq
        with pytest.raises(SessionNotFoundError):
            await again.resume("nope")
        await again.close()
        assert ("session_start", "resume") in recorder.calls

    async def test_resume_veto_releases(self, tmp_path: Path) -> None:
        """A vetoed resumed agent releases its session again."""
        recorder = Recorder()
        host = await open_host(tmp_path, Recorder())
        agent = await host.run("hi")
        await host.close()
        recorder.veto_agent = True
        again = await open_host(tmp_path, recorder)
        with pytest.raises(PluginError):
            await again.resume(agent.id)
        assert again.sessions.list() == ()
        await again.close()
        assert recorder.calls[-1][0] == "session_disposed"

    async def test_agent_names(self) -> None:
        """Roots are ``lead``; children use their descriptor label, else their id."""
        host = await Host.open(None, None, model())
        root = await host.create_session("root")
        child = await host.create_session("child", parent_session="root")
        assert agent_name(root) == "lead" and agent_name(child) == "child"
        child.append(EventType.SUBAGENT_DESCRIPTOR, SubagentDescriptor(version=2, mode="continuable", provider="spawn"))
        assert agent_name(child) == "child"
        labelled = await host.create_session("c2", parent_session="root")
        labelled.append(
            EventType.SUBAGENT_DESCRIPTOR,
            SubagentDescriptor(version=2, mode="continuable", provider="spawn", label="alice"),
        )
        assert agent_name(labelled) == "alice"
        await host.close()


class TestModels:
    def test_resolve_model(self, tmp_path: Path) -> None:
        """Adapters pass through; ``scripted:FILE`` loads a script; anything else is unknown."""
        adapter = model()
        assert resolve_model(adapter) is adapter
        script = tmp_path / "s.json"
        script.write_text('{"lead": []}')
        assert isinstance(resolve_model(f"scripted:{script}"), ScriptedModel)
        with pytest.raises(ModelError, match='unknown model "nope:x"') as info:
            resolve_model("nope:x")
        assert info.value.code == "MODEL_UNKNOWN"
