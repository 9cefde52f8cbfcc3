"""Scope: the LIFO disposer ledger every agent owns."""

from __future__ import annotations

import gc
import weakref

import pytest

from host_spec.host.agents.scope import Scope, ScopeDisposedError
from host_spec.records import Handle


class TestScopeLedger:
    def test_dispose_runs_handles_newest_first(self) -> None:
        """Disposal unwinds registrations in reverse order, like a plugin's effects."""
        order: list[str] = []
        scope = Scope(label="agent:a")
        for name in ("a", "b", "c"):
            scope.add(Handle(lambda name=name: order.append(name), name))
        scope.dispose()
        assert order == ["c", "b", "a"]
        assert scope.disposed

    def test_dispose_is_idempotent(self) -> None:
        """A second dispose runs nothing again."""
        calls: list[int] = []
        scope = Scope()
        scope.on_dispose(lambda: calls.append(1))
        scope.dispose()
        scope.dispose()
        assert calls == [1]

    def test_add_returns_the_handle(self) -> None:
        """``add`` hands the handle back so callers can keep it."""
        scope = Scope()
        handle = Handle(lambda: None)
        assert scope.add(handle) is handle
        assert scope.live_count() == 1

    def test_add_to_disposed_scope_disposes_handle_and_raises(self) -> None:
        """A registration can never outlive its owner: it is undone at once."""
        scope = Scope(label="agent:x")
        scope.dispose()
        handle = Handle(lambda: None)
        with pytest.raises(ScopeDisposedError) as info:
            scope.add(handle)
        assert info.value.code == "SCOPE_DISPOSED"
        assert handle.disposed

    def test_failing_disposer_does_not_stop_the_unwind(self) -> None:
        """One broken disposer is logged; the rest of the ledger still unwinds."""
        order: list[str] = []

        def boom() -> None:
            raise RuntimeError("boom")

        scope = Scope()
        scope.on_dispose(lambda: order.append("first"))
        scope.on_dispose(boom)
        scope.on_dispose(lambda: order.append("last"))
        scope.dispose()
        assert order == ["last", "first"]

    def test_handles_disposed_early_are_pruned(self) -> None:
        """Churn (register/unregister) does not grow the ledger without bound."""
        scope = Scope()
        released = []
        for _ in range(500):
            churned = scope.add(Handle(lambda: None))
            churned.dispose()
            released.append(weakref.ref(churned))
        del churned
        keep = scope.add(Handle(lambda: None))
        gc.collect()
        assert scope.live_count() == 1
        assert sum(ref() is not None for ref in released) < 70  # the scope let go of the disposed ones
        scope.dispose()
        assert keep.disposed
