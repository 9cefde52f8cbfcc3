"""The plugin manager: load by name, ownership ledger, and the hook-calling rules."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest
import structlog

from host_spec import hookimpl
from kit_waits import ready_work_ran, until
from host_spec.errors import ConfigError, InvariantError, PluginError, RegistrationError
from host_spec.host.plugins import discovery, loading
from host_spec.host.plugins.discovery import discover
from host_spec.host.plugins.manager import PluginManager
from host_spec.host.agents.tools import ToolRegistry
from host_spec.records import Handle, Violation


def make_host(continuations: Any = None) -> Any:
    return types.SimpleNamespace(continuations=continuations, tools=ToolRegistry())


def manager(host: Any = None) -> PluginManager:
    return PluginManager(host=host or make_host())


class Recorder:
    """A plugin object recording its lifecycle calls into a shared list."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    @hookimpl
    def dsh_plugin_loaded(self, ctx: Any) -> None:
        self.log.append(f"{self.name}:loaded")
        ctx.own(Handle(lambda: self.log.append(f"{self.name}:handle1")))
        ctx.own(Handle(lambda: self.log.append(f"{self.name}:handle2")))

    @hookimpl
    async def dsh_plugin_teardown(self, ctx: Any) -> None:
        await asyncio.sleep(0)
        self.log.append(f"{self.name}:teardown")

    @hookimpl
    def dsh_plugin_unload(self, ctx: Any) -> None:
        self.log.append(f"{self.name}:unload")


class TestLoading:
    def test_base_plugins_load_by_entry_name(self) -> None:
        """Listed entry names are registered under exactly that name, in order."""
        pm = manager()
        for name in ("subagent", "subagent-fork", "subagent-control"):
            pm.load(name, {})
        assert pm.names() == ["subagent", "subagent-fork", "subagent-control"]
        assert {name for name, _ in pm.pm.list_name_plugin()} == set(pm.names())
        assert pm.get("subagent").module == "host_spec.host.base.subagent"  # type: ignore[union-attr]

    def test_unknown_name_is_a_plugin_error_naming_it(self) -> None:
        """A name no entry point declares fails and names the plugin."""
        with pytest.raises(PluginError, match='unknown plugin "nope"'):
            manager().load("nope")

    def test_loading_twice_is_refused(self) -> None:
        """A plugin name is registered at most once."""
        pm = manager()
        pm.load("subagent-control")
        with pytest.raises(PluginError, match="already loaded"):
            pm.load("subagent-control")

    def test_import_failure_is_reported(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An entry point whose module cannot import fails with the plugin's name."""
        broken = discovery.EntryPoint("ghost", "no_such_module_xyz", "dsh")
        monkeypatch.setattr(loading, "discover", lambda: {"ghost": broken})
        with pytest.raises(PluginError, match='plugin "ghost" failed to import: ModuleNotFoundError'):
            manager().load("ghost")

    def test_duplicate_entry_point_names_are_an_error(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Two distributions declaring one name with different targets are never silently merged."""
        eps = [discovery.EntryPoint("x", "a.b", "dsh"), discovery.EntryPoint("x", "c.d", "dsh")]
        monkeypatch.setattr(discovery, "entry_points", lambda group: eps)
        with pytest.raises(PluginError, match='"x" is declared twice'):
            discover()

    def test_invalid_hook_frees_the_name(self) -> None:
        """An impl for an unknown hook fails validation and leaves nothing registered."""

        class Bad:
            @hookimpl
            def dsh_no_such_hook(self, host: Any) -> None: ...

        pm = manager()
        with pytest.raises(PluginError, match='plugin "bad" is invalid'):
            pm.load("bad", plugin=Bad())
        assert pm.names() == [] and pm.pm.get_plugin("bad") is None
        pm.load("bad", plugin=Recorder("r", []))  # the name is free again
        assert pm.names() == ["bad"]

    def test_one_object_under_two_names_is_refused(self) -> None:
        """The same object cannot be registered twice; the first registration stays intact."""
        pm = manager()
        plugin = Recorder("r", [])
        pm.load("a", plugin=plugin)
        with pytest.raises(PluginError, match='plugin "b" is invalid'):
            pm.load("b", plugin=plugin)
        assert pm.names() == ["a"] and pm.pm.get_plugin("a") is plugin

    def test_module_objects_remember_their_import_path(self) -> None:
        """A module registered directly records its name, so it can be reloaded later."""
        import host_spec.host.base.control as control

        loaded = manager().load("ctl", plugin=control)
        assert (loaded.module, loaded.attr) == ("host_spec.host.base.control", None)
        assert manager().load("obj", plugin=Recorder("r", [])).module is None

    def test_wrappers_are_refused(self) -> None:
        """Hook wrappers would bypass per-implementation calling, so they are rejected."""

        class Wrapping:
            @hookimpl(wrapper=True)
            def dsh_session_event(self, host: Any, session: Any, event: Any) -> Any:
                return (yield)

        pm = manager()
        with pytest.raises(PluginError, match="wrappers are not supported"):
            pm.load("wrap", plugin=Wrapping())
        assert pm.pm.get_plugin("wrap") is None

    def test_async_impls_of_sync_hooks_are_refused(self) -> None:
        """Only ``dsh_plugin_teardown`` is awaited; an async impl of another hook would never run."""

        class Eager:
            @hookimpl
            async def dsh_agent_created(self, agent: Any) -> None: ...

        pm = manager()
        with pytest.raises(PluginError, match="dsh_agent_created must not be async"):
            pm.load("eager", plugin=Eager())
        assert pm.pm.get_plugin("eager") is None

    def test_config_error_from_load_propagates_and_rolls_back(self) -> None:
        """A ``ConfigError`` from ``dsh_plugin_loaded`` keeps its code; the ledger is disposed."""
        disposed: list[str] = []

        class Strict:
            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                ctx.own(Handle(lambda: disposed.append("h")))
                raise ConfigError("bad", path="plugins.strict.x")

        pm = manager()
        with pytest.raises(ConfigError, match="plugins.strict.x"):
            pm.load("strict", plugin=Strict())
        assert disposed == ["h"] and pm.names() == [] and pm.pm.get_plugin("strict") is None

    def test_config_errors_of_base_plugins(self) -> None:
        """Base plugins validate their own table and name the field."""
        with pytest.raises(ConfigError, match=r"extra fields found \(bogus\) @ plugins.subagent"):
            manager().load("subagent", {"bogus": 1})
        with pytest.raises(ConfigError, match=r"'max_depth' must be >= 1"):
            manager().load("subagent-fork", {"max_depth": 0})
        with pytest.raises(ConfigError, match=r"@ plugins.subagent-control"):
            manager().load("subagent-control", {"x": 1})

    def test_other_load_failures_become_plugin_errors(self) -> None:
        """A bug in ``dsh_plugin_loaded`` becomes a ``PluginError`` naming the plugin."""

        class Buggy:
            @hookimpl
            def dsh_plugin_loaded(self) -> None:
                raise KeyError("oops")

        with pytest.raises(PluginError, match='plugin "buggy" failed to load: KeyError'):
            manager().load("buggy", plugin=Buggy())


class TestContext:
    async def test_unload_order(self) -> None:
        """Unload awaits teardown, then calls unload, then disposes the ledger LIFO."""
        events: list[str] = []
        pm = manager()
        pm.load("a", plugin=Recorder("a", events))
        pm.load("b", plugin=Recorder("b", events))
        await pm.unload_all()
        assert pm.names() == []
        assert events == [
            "a:loaded",
            "b:loaded",
            "b:teardown",
            "b:unload",
            "b:handle2",
            "b:handle1",
            "a:teardown",
            "a:unload",
            "a:handle2",
            "a:handle1",
        ]

    async def test_hook_failures_during_unload_are_contained(self) -> None:
        """A failing teardown is logged and the unload still disposes everything."""
        disposed: list[str] = []

        class Failing:
            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                ctx.own(Handle(lambda: disposed.append("h")))
                ctx.own(Handle(lambda: 1 / 0, label="boom"))

            @hookimpl
            async def dsh_plugin_teardown(self) -> None:
                raise RuntimeError("teardown broke")

        pm = manager()
        pm.load("f", plugin=Failing())
        with structlog.testing.capture_logs() as logs:
            await pm.unload("f")
        assert {entry["event"] for entry in logs} >= {"plugin.unload_hook_failed", "plugin.dispose_failed"}
        assert pm.names() == []
        assert disposed == ["h"]

    async def test_unload_unknown_plugin(self) -> None:
        """Unloading a name that is not loaded is an error."""
        with pytest.raises(PluginError, match="not loaded"):
            await manager().unload("x")

    async def test_spawned_tasks_are_supervised(self) -> None:
        """``spawn`` tasks are cancelled on unload; a failing task is logged."""
        state: dict[str, Any] = {}

        class Spawner:
            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                state["ctx"] = ctx
                state["forever"] = ctx.spawn(asyncio.sleep(3600), name="forever")
                state["fails"] = ctx.spawn(self.fail())

            async def fail(self) -> None:
                raise ValueError("task broke")

        pm = manager()
        with structlog.testing.capture_logs() as logs:
            pm.load("s", plugin=Spawner())
            await until(lambda: any(e["event"] == "plugin.task_failed" for e in logs), what="the failing task's log")
        assert any(e["event"] == "plugin.task_failed" and e["plugin"] == "s" for e in logs)
        await pm.unload("s")
        assert state["forever"].cancelled()
        with pytest.raises(PluginError, match="unloaded"):
            state["ctx"].spawn(asyncio.sleep(0))
        with pytest.raises(PluginError, match="unloaded"):
            state["ctx"].spawn(asyncio.get_running_loop().create_future())

    async def test_finished_tasks_leave_the_supervisor(self) -> None:
        """A task that ends normally is forgotten and logs nothing."""

        class Quick:
            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                ctx.spawn(asyncio.sleep(0), name="quick")

        pm = manager()
        with structlog.testing.capture_logs() as logs:
            loaded = pm.load("q", plugin=Quick())
            await ready_work_ran()  # the quick task finished
        assert loaded.ctx.close() == []  # unload would cancel nothing: the finished task was forgotten
        assert [entry["event"] for entry in logs] == ["plugin.loaded"]

    async def test_provide_publishes_until_unload(self) -> None:
        """``provide`` publishes a service for its type; unload removes it; a type is provided once."""

        class Provider:
            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                ctx.provide(str, "service-object")

        pm = manager()
        pm.load("p", plugin=Provider())
        assert pm.services.keys() == ["builtins.str"] and pm.services.get(str) == "service-object"
        with pytest.raises(RegistrationError, match='service "builtins.str" is already provided by plugin "p"'):
            pm.load("q", plugin=Provider())
        assert pm.names() == ["p"]
        await pm.unload("p")
        assert pm.services.keys() == []
        pm.load("q", plugin=Provider())  # the type is free again
        assert pm.services.get(str) == "service-object"

    async def test_closed_context_refuses_and_disposes(self) -> None:
        """A registration on a closed context is disposed at once and refused."""
        disposed: list[str] = []
        pm = manager()
        loaded = pm.load("r", plugin=Recorder("r", []))
        await pm.unload("r")
        with pytest.raises(PluginError):
            loaded.ctx.own(Handle(lambda: disposed.append("late")))
        assert disposed == ["late"]


class Observer:
    def __init__(self, name: str, seen: list[str], *, fail: bool = False, veto: str | None = None) -> None:
        self.name, self.seen, self.fail, self.veto_reason = name, seen, fail, veto

    @hookimpl
    def dsh_session_event(self, event: Any) -> None:
        self.seen.append(f"{self.name}:{event}")
        if self.fail:
            raise RuntimeError("observer broke")

    @hookimpl
    def dsh_pre_append(self, host: Any, session: Any, event: Any) -> Violation | None:
        self.seen.append(f"{self.name}:pre")
        return Violation(self.veto_reason) if self.veto_reason else None

    @hookimpl
    def dsh_agent_created(self, agent: Any) -> None:
        self.seen.append(f"{self.name}:created")
        if self.fail:
            raise RuntimeError("veto")


class TestHookCalling:
    def test_observer_failures_are_contained(self) -> None:
        """One failing observer is logged with its error; the observers after it still run, nothing raises."""
        seen: list[str] = []
        pm = manager()
        pm.load("a", plugin=Observer("a", seen))
        pm.load("b", plugin=Observer("b", seen, fail=True))
        pm.load("c", plugin=Observer("c", seen))
        with structlog.testing.capture_logs() as logs:
            pm.notify("dsh_session_event", host=None, session=None, event="e1")
        # pluggy calls the most recently registered implementation first: c, then the failing b, then a
        assert seen == ["c:e1", "b:e1", "a:e1"]
        assert [(e["event"], e["plugin"], e["hook"]) for e in logs] == [("plugin.hook_failed", "b", "dsh_session_event")]
        assert logs[0]["log_level"] == "error" and logs[0]["exc_info"] is True

    def test_veto_hooks_propagate(self) -> None:
        """A veto hook's exception reaches the caller, and the implementations after it do not run."""
        seen: list[str] = []
        pm = manager()
        pm.load("later", plugin=Observer("later", seen))
        pm.load("vetoing", plugin=Observer("vetoing", seen, fail=True))  # registered last: called first
        with pytest.raises(RuntimeError, match="veto"):
            pm.veto("dsh_agent_created", host=None, agent=None)
        assert seen == ["vetoing:created"]

    def test_pre_append_collects_every_violation(self) -> None:
        """Every impl runs; the error names the first vetoing plugin and keeps every reason."""
        seen: list[str] = []
        pm = manager()
        pm.load("first", plugin=Observer("first", seen, veto="reason one"))
        pm.load("ok", plugin=Observer("ok", seen))
        pm.load("last", plugin=Observer("last", seen, veto="reason two"))
        with pytest.raises(InvariantError) as info:
            pm.pre_append(session=None, event=None)
        # pluggy calls the most recently registered implementation first
        assert info.value.plugin == "last" and info.value.reasons == ["reason two", "reason one"]
        assert info.value.code == "INVARIANT"
        assert sorted(seen) == ["first:pre", "last:pre", "ok:pre"]

    def test_pre_append_allows_when_nobody_vetoes(self) -> None:
        """No implementation, or only ``None`` answers, lets the append through."""
        seen: list[str] = []
        pm = manager()
        assert pm.pre_append(session=None, event=None) is None
        pm.load("ok", plugin=Observer("ok", seen))
        assert pm.pre_append(session=None, event=None) is None
        assert seen == ["ok:pre"]  # it was asked, and its ``None`` let the append through

    def test_pre_append_impls_may_take_a_subset_of_arguments(self) -> None:
        """An impl naming only some hook arguments gets exactly those (pluggy's rule), and may veto."""
        seen: list[Any] = []

        class EventOnly:
            @hookimpl
            def dsh_pre_append(self, event: Any) -> Violation | None:
                seen.append(event)
                return Violation(reason="no") if event == "bad" else None

        pm = manager()
        pm.load("event-only", plugin=EventOnly())
        pm.pre_append(session="s", event="good")
        with pytest.raises(InvariantError) as info:
            pm.pre_append(session="s", event="bad")
        assert seen == ["good", "bad"] and info.value.plugin == "event-only"

    def test_session_observers_get_exactly_their_arguments(self) -> None:
        """notify_session passes each shape of (host, session, value) impl what it names; failures are contained."""
        seen: list[tuple[str, tuple[Any, ...]]] = []
        host = make_host()

        class Full:
            @hookimpl
            def dsh_session_flushed(self, host: Any, session: Any, durable_seq: int) -> None:
                seen.append(("full", (host, session, durable_seq)))

        class Pair:
            @hookimpl
            def dsh_session_flushed(self, session: Any, durable_seq: int) -> None:
                seen.append(("pair", (session, durable_seq)))

        class SessionOnly:
            @hookimpl
            def dsh_session_flushed(self, session: Any) -> None:
                seen.append(("session", (session,)))
                raise RuntimeError("observer broke")

        class Reordered:
            @hookimpl
            def dsh_session_flushed(self, durable_seq: int, host: Any) -> None:
                seen.append(("reordered", (durable_seq, host)))

        pm = manager(host)
        pm.notify_session("dsh_session_flushed", "s", "durable_seq", 0)  # nobody listens yet
        for name, plugin in (("full", Full()), ("pair", Pair()), ("session", SessionOnly()), ("reordered", Reordered())):
            pm.load(name, plugin=plugin)
        with structlog.testing.capture_logs() as logs:
            pm.notify_session("dsh_session_flushed", "s", "durable_seq", 7)
        assert sorted(seen, key=lambda entry: entry[0]) == [
            ("full", (host, "s", 7)),
            ("pair", ("s", 7)),
            ("reordered", (7, host)),
            ("session", ("s",)),
        ]
        assert [(e["event"], e["plugin"]) for e in logs] == [("plugin.hook_failed", "session")]

    def test_call_for_reaches_one_plugin(self) -> None:
        """Lifecycle calls go to the named plugin only."""
        events: list[str] = []
        pm = manager()
        pm.load("a", plugin=Recorder("a", events))
        pm.load("b", plugin=Recorder("b", events))
        pm.call_for("a", "dsh_plugin_unload", host=None, ctx=None)
        assert events[-1] == "a:unload" and "b:unload" not in events

    async def test_impl_cache_follows_registration(self) -> None:
        """The per-hook cache is rebuilt after load and unload."""
        seen: list[str] = []
        pm = manager()
        pm.notify("dsh_session_event", host=None, session=None, event="before")
        pm.load("a", plugin=Observer("a", seen))
        pm.notify("dsh_session_event", host=None, session=None, event="during")
        await pm.unload("a")
        pm.notify("dsh_session_event", host=None, session=None, event="after")
        assert seen == ["a:during"]


class TestBasePlugins:
    """Only registration is tested here; the tools' behaviour belongs to the continuations tests."""

    def test_no_tools_without_continuations(self) -> None:
        """On a host without continuable children the legacy plugins register nothing."""
        host = make_host()
        pm = manager(host)
        for name in ("subagent", "subagent-fork", "subagent-control"):
            pm.load(name)
        assert host.tools.visible(None) == []

    async def test_tools_are_owned_by_the_plugin_ledgers(self) -> None:
        """With continuations the legacy tools are registered, and unloading removes every one."""
        host = make_host(continuations=types.SimpleNamespace())
        pm = manager(host)
        for name in ("subagent", "subagent-fork", "subagent-control"):
            pm.load(name)
        names = {spec.name for spec in host.tools.visible(None)}
        assert {"subagent", "subagent_fork", "send_message", "interrupt_agent"} <= names
        await pm.unload_all()
        assert host.tools.visible(None) == []
