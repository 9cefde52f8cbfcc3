"""Per-host hook objects (``ctx.register``) and services found by type (``ctx.provide``).

Real plugin manager and real reference hosts; the plugins are small modules and
objects written here, so each rule is visible in one place.
"""

from __future__ import annotations

import asyncio
import types
from typing import Any, Protocol, runtime_checkable

import pytest

from host_spec import hookimpl
from host_spec.errors import InvariantError, PluginError, RegistrationError, ServiceNotFoundError
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.plugins.manager import PluginManager
from host_spec.host.plugins.services import ServiceRegistry, service_key
from host_spec.records import Violation


def model() -> ScriptedModel:
    return ScriptedModel.from_mapping({})


class Counter:
    """Per-host state: the events one host committed, and what its lifecycle hooks saw."""

    def __init__(self, host: Any) -> None:
        self.host = host
        self.events: list[tuple[str, int]] = []
        self.lifecycle: list[str] = []

    @hookimpl
    def dsh_session_event(self, session: Any, event: Any) -> None:
        self.events.append((session.id, event.seq))

    @hookimpl(specname="dsh_pre_append")
    def refuse_forbidden(self, session: Any, event: Any) -> Violation | None:
        return Violation("forbidden type") if event.type == "test/forbidden" else None

    @hookimpl
    async def dsh_plugin_teardown(self) -> None:
        await asyncio.sleep(0)
        self.lifecycle.append("teardown")

    @hookimpl
    def dsh_plugin_unload(self, host: Any) -> None:
        self.lifecycle.append(f"unload:{host is self.host}")


def counting_module() -> types.ModuleType:
    """A plugin module without state: it builds one :class:`Counter` per host it loads into."""
    module = types.ModuleType("counting_plugin")

    @hookimpl
    def dsh_plugin_loaded(host: Any, ctx: Any) -> None:
        ctx.register(Counter(host))

    module.dsh_plugin_loaded = dsh_plugin_loaded  # type: ignore[attr-defined]
    return module


def counter_of(host: Host) -> Counter:
    (counter,) = host.plugins.hook_objects("counting")
    assert isinstance(counter, Counter)
    return counter


class TestHookObjects:
    async def test_one_module_two_hosts_share_nothing(self) -> None:
        """Each host gets its own object; events of one host never reach the other's."""
        module = counting_module()

        one = await Host.open(None, None, model(), extra_plugins=[("counting", module)])
        two = await Host.open(None, None, model(), extra_plugins=[("counting", module)])
        try:
            first, second = counter_of(one), counter_of(two)
            assert first is not second and (first.host, second.host) == (one, two)
            a = await one.create_session("a")
            b = await two.create_session("b")
            a.append("test/x", {})
            a.append("test/x", {})
            b.append("test/x", {})
            assert first.events == [("a", 1), ("a", 2)] and second.events == [("b", 1)]
        finally:
            await one.close()
            await two.close()

    async def test_a_veto_names_the_owning_plugin(self) -> None:
        """An object's veto raises ``InvariantError`` naming the plugin that registered it."""
        host = await Host.open(None, None, model(), extra_plugins=[("counting", counting_module())])
        try:
            session = await host.create_session()
            with pytest.raises(InvariantError) as info:
                session.append("test/forbidden", {})
            assert (info.value.plugin, info.value.reasons) == ("counting", ["forbidden type"])
            assert session.last_seq == 0 and counter_of(host).events == []
        finally:
            await host.close()

    async def test_unload_runs_the_objects_lifecycle_hooks_then_unregisters_it(self) -> None:
        """Teardown is awaited, unload called, then the object is gone from the host's hooks."""
        host = await Host.open(None, None, model(), extra_plugins=[("counting", counting_module())])
        try:
            counter = counter_of(host)
            session = await host.create_session()
            await host.plugins.unload("counting")
            assert counter.lifecycle == ["teardown", "unload:True"]
            assert host.plugins.hook_objects("counting") == []
            assert all(plugin is not counter for plugin in host.plugins.pm.get_plugins())
            session.append("test/forbidden", {})  # no veto any more, no observer either
            assert session.last_seq == 1 and counter.events == []
        finally:
            await host.close()

    def test_objects_are_named_under_their_plugin(self) -> None:
        """Registered as ``<plugin>/<class>`` (or ``<plugin>/<name>``); a taken name is refused."""
        seen: list[str] = []

        class Twice:
            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                ctx.register(Counter(ctx.host))
                ctx.register(Counter(ctx.host), name="second")
                with pytest.raises(PluginError, match='hook object "twice/Counter" is already registered'):
                    ctx.register(Counter(ctx.host))
                seen.append("checked")

        pm = PluginManager(host=types.SimpleNamespace())
        pm.load("twice", plugin=Twice())
        assert seen == ["checked"]
        assert pm.pm.has_plugin("twice/Counter") and pm.pm.has_plugin("twice/second")
        assert len(pm.hook_objects("twice")) == 2

    def test_an_object_may_not_implement_plugin_loaded(self) -> None:
        """``dsh_plugin_loaded`` belongs to the module; such an object fails the load and leaves nothing."""

        class Confused:
            @hookimpl
            def dsh_plugin_loaded(self) -> None:
                raise AssertionError("never called")

        class Loader:
            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                ctx.register(Confused())

        pm = PluginManager(host=types.SimpleNamespace())
        with pytest.raises(PluginError, match="dsh_plugin_loaded belongs to the plugin module"):
            pm.load("loader", plugin=Loader())
        assert pm.names() == [] and pm.pm.get_plugins() == set()

    def test_an_object_with_an_invalid_hook_fails_the_load(self) -> None:
        """An object's hook is validated like a module's: an unknown hook rolls the load back."""

        class Stray:
            @hookimpl
            def dsh_no_such_hook(self) -> None:
                raise AssertionError("never called")

        class Loader:
            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                ctx.register(Stray())

        pm = PluginManager(host=types.SimpleNamespace())
        with pytest.raises(PluginError, match='plugin "loader/Stray" is invalid'):
            pm.load("loader", plugin=Loader())
        assert pm.names() == [] and pm.pm.get_plugins() == set() and pm.hook_objects("loader") == []

    def test_a_load_failing_after_registering_leaves_no_object(self) -> None:
        """The ledger unregisters an object when the rest of ``dsh_plugin_loaded`` fails."""

        class Loader:
            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                ctx.register(Counter(ctx.host))
                raise RuntimeError("broke after registering")

        pm = PluginManager(host=types.SimpleNamespace())
        with pytest.raises(PluginError, match="broke after registering"):
            pm.load("loader", plugin=Loader())
        assert pm.names() == [] and pm.pm.get_plugins() == set() and pm.hook_objects("loader") == []
        assert pm.impls("dsh_session_event") == ()  # the call cache forgot it too

    async def test_a_closed_context_refuses_objects_and_services(self) -> None:
        """After unload, a stale context registers nothing."""

        class Keeper:
            ctx: Any = None

            @hookimpl
            def dsh_plugin_loaded(self, ctx: Any) -> None:
                self.ctx = ctx

        keeper = Keeper()
        pm = PluginManager(host=types.SimpleNamespace())
        pm.load("k", plugin=keeper)
        await pm.unload("k")
        with pytest.raises(PluginError, match="hook object refused"):
            keeper.ctx.register(Counter(None))
        with pytest.raises(PluginError, match="service refused"):
            keeper.ctx.provide(Counter, Counter(None))
        assert pm.pm.get_plugins() == set() and pm.services.keys() == []



# ---------------------------------------------------------------- services by type


@runtime_checkable
class Greeter(Protocol):
    def greet(self) -> str: ...


class English:
    def greet(self) -> str:
        return "hello"


class Untyped(Protocol):
    def greet(self) -> str: ...


class TestServicesByType:
    def test_a_protocol_finds_its_implementation_typed(self) -> None:
        """``get`` returns the provided object; the handle withdraws it."""
        registry = ServiceRegistry()
        english = English()
        handle = registry.provide("p", Greeter, english)
        assert registry.get(Greeter) is english and registry.get(Greeter).greet() == "hello"
        handle.dispose()
        assert registry.find(Greeter) is None
        with pytest.raises(ServiceNotFoundError, match=f'"{__name__}.Greeter"'):
            registry.get(Greeter)

    def test_the_key_is_the_import_path_so_a_reloaded_api_class_still_matches(self) -> None:
        """A caller holding the API class from before a reload finds the service provided with the new class."""
        old_api = Greeter
        namespace: dict[str, Any] = {"Protocol": Protocol, "runtime_checkable": runtime_checkable, "__name__": __name__}
        exec("@runtime_checkable\nclass Greeter(Protocol):\n    def greet(self) -> str: ...\n", namespace)
        new_api = namespace["Greeter"]
        assert new_api is not old_api and service_key(new_api) == service_key(old_api)
        registry = ServiceRegistry()
        english = English()
        registry.provide("p", new_api, english)
        assert registry.get(old_api) is english

    def test_a_service_that_is_not_an_instance_is_refused(self) -> None:
        """A runtime-checkable Protocol or a class is checked; nothing is published on a mismatch."""
        registry = ServiceRegistry()
        with pytest.raises(RegistrationError) as info:
            registry.provide("p", Greeter, object())
        assert info.value.code == "SERVICE_MISMATCH" and registry.keys() == []
        with pytest.raises(RegistrationError, match="not an instance"):
            registry.provide("p", English, object())
        registry.provide("p", Untyped, English())  # a plain Protocol cannot be checked at run time
        assert registry.keys() == [f"{__name__}.Untyped"]

    def test_only_types_are_keys(self) -> None:
        """A string (the old key style) or a value is refused with ``SERVICE_MISMATCH``."""
        registry = ServiceRegistry()
        for api in ("agent_teams", 42):
            with pytest.raises(RegistrationError, match="must be a class or a Protocol") as info:
                registry.provide("p", api, English())
            assert info.value.code == "SERVICE_MISMATCH"
        with pytest.raises(RegistrationError):
            registry.find("agent_teams")
        with pytest.raises(RegistrationError):
            registry.find([])  # type: ignore[arg-type]  # unhashable: refused the same way

    def test_lookups_stay_right_past_the_key_cache(self) -> None:
        """Many API classes (a long watch session reloads them) are all found; the key cache starts over."""
        registry = ServiceRegistry()
        apis = [type(f"Api{index}", (), {"__module__": __name__}) for index in range(600)]
        for index, api in enumerate(apis):
            registry.provide("p", api, api())
            assert isinstance(registry.find(api), api) and service_key(api) == f"{__name__}.Api{index}"
        assert all(isinstance(registry.get(api), api) for api in apis)

    def test_a_type_is_provided_once(self) -> None:
        """The second provider of one API is refused and named with the first."""
        registry = ServiceRegistry()
        registry.provide("first", Greeter, English())
        with pytest.raises(RegistrationError, match='already provided by plugin "first"') as info:
            registry.provide("second", Greeter, English())
        assert info.value.code == "ALREADY_REGISTERED"
