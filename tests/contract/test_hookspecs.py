"""Every hookspec is documented, takes ``host`` first, and says whether it may veto."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable

import pluggy
import pytest

from host_spec import PROJECT, hookspecs
from host_spec.host.plugins.discovery import new_pluggy_manager

EXPECTED = {
    "dsh_plugin_loaded",
    "dsh_plugin_unload",
    "dsh_plugin_teardown",
    "dsh_session_created",
    "dsh_pre_append",
    "dsh_session_event",
    "dsh_session_flushed",
    "dsh_session_disposed",
    "dsh_agent_created",
    "dsh_agent_session_start",
    "dsh_agent_status",
    "dsh_agent_disposed",
    "dsh_agent_turn_end",
    "dsh_context_brief",
    "dsh_agent_pre_step",
    "dsh_tool_pre_call",
}


def specs(module: types.ModuleType) -> dict[str, Callable[..., object]]:
    """The hookspec functions of ``module`` (marked for project ``dsh``)."""
    return {
        name: fn
        for name, fn in vars(module).items()
        if callable(fn) and hasattr(fn, f"{PROJECT}_spec")
    }


def problems(module: types.ModuleType) -> list[str]:
    """What is wrong with the documentation of ``module``'s hookspecs."""
    found = []
    for name, fn in specs(module).items():
        doc = inspect.getdoc(fn) or ""
        if not doc.strip():
            found.append(f"{name}: no docstring")
        elif "May veto:" not in doc:
            found.append(f'{name}: docstring does not say "May veto:"')
        if not name.startswith("dsh_"):
            found.append(f"{name}: not prefixed dsh_")
        params = list(inspect.signature(fn).parameters)
        if not params or params[0] != "host":
            found.append(f"{name}: first argument is not host")
    return found


class TestHookspecDocs:
    def test_the_spec_set_is_the_documented_one(self) -> None:
        """The contract defines exactly the hooks the host calls."""
        assert set(specs(hookspecs)) == EXPECTED

    def test_every_hookspec_is_documented(self) -> None:
        """Every hookspec has a docstring saying whether it may veto, and takes host first."""
        assert problems(hookspecs) == []

    def test_the_checker_catches_an_undocumented_spec(self) -> None:
        """The check fails for a spec without docstring, without a veto line, or without host."""
        marker = pluggy.HookspecMarker(PROJECT)
        fake = types.ModuleType("fake_specs")

        def dsh_nodoc(host):  # type: ignore[no-untyped-def]
            pass

        def dsh_noveto(host):  # type: ignore[no-untyped-def]
            """Documented but silent on vetoes."""

        def dsh_nohost(session):  # type: ignore[no-untyped-def]
            """May veto: no."""

        for fn in (dsh_nodoc, dsh_noveto, dsh_nohost):
            setattr(fake, fn.__name__, marker(fn))
        assert sorted(problems(fake)) == [
            'dsh_nodoc: no docstring',
            'dsh_nohost: first argument is not host',
            'dsh_noveto: docstring does not say "May veto:"',
        ]

    @pytest.mark.parametrize(
        "hook", ["dsh_plugin_loaded", "dsh_session_created", "dsh_pre_append", "dsh_agent_created"]
    )
    def test_veto_hooks_say_yes(self, hook: str) -> None:
        """The four veto hooks document that they may veto; no other hook does."""
        assert "May veto: yes" in (inspect.getdoc(getattr(hookspecs, hook)) or "")

    def test_observer_hooks_say_no(self) -> None:
        """Every other hook documents that it may not veto."""
        vetoes = {"dsh_plugin_loaded", "dsh_session_created", "dsh_pre_append", "dsh_agent_created", "dsh_agent_pre_step",
                  "dsh_tool_pre_call"}
        for name in EXPECTED - vetoes:
            assert "May veto: no" in (inspect.getdoc(getattr(hookspecs, name)) or ""), name

    def test_specs_register_on_a_manager(self) -> None:
        """The specs load into a ``dsh`` pluggy manager, none historic or firstresult."""
        pm = new_pluggy_manager()
        for name in EXPECTED:
            caller = getattr(pm.hook, name)
            assert caller.spec is not None
            assert not caller.spec.opts.get("historic") and not caller.spec.opts.get("firstresult")
