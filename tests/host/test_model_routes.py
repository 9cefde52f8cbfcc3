"""Model routing: per-member models from a profile, specs resolved through ``dsh.models``, reply checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog

from host_spec.errors import ConfigError, ModelError
from host_spec.extras import ExtraNotInstalledError
from host_spec.events import EventType, SubagentDescriptor
from host_spec.host.app import Host
from host_spec.host.cli.main import main
from host_spec.host.models.adapter import parse_reply
from host_spec.host.models.registry import ModelRoutes, resolve_spec, spec_label
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text


@pytest.fixture(autouse=True)
def _logging() -> Any:
    """``main()`` configures structlog for the process; undo it for the tests that follow."""
    yield
    structlog.reset_defaults()


def spawn(name: str) -> dict[str, Any]:
    return {"name": "spawn_teammate", "arguments": {"name": name, "description": name, "prompt": f"work, {name}"}}


def assistant_texts(store: JsonlStore, session_id: str) -> list[str]:
    return [message_text(e.value()["content"]) for e in store.read(session_id)[1] if e.type == EventType.ASSISTANT_MESSAGE]


def test_a_profile_gives_matching_members_their_own_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lead_script = tmp_path / "lead.json"
    lead_script.write_text(json.dumps({"lead": [{"tool_calls": [spawn("builder"), spawn("reviewer")]}, {"text": "ok"}],
                                       "builder": [{"text": "builder on the lead's model"}],
                                       "reviewer": [{"text": "wrong model"}]}))
    review_script = tmp_path / "review.json"
    review_script.write_text(json.dumps({"reviewer": [{"text": "reviewer on its own model"}]}))
    profile = tmp_path / "team.toml"
    profile.write_text(f'extends = "agent-teams"\n[models]\n"rev*" = "scripted:{review_script}"\n')
    data = tmp_path / "data"
    assert main(["run", "--profile", str(profile), "--model", f"scripted:{lead_script}", "--data-dir", str(data), "go"]) == 0
    store = JsonlStore(data)
    models = {}
    for session_id in store.list_ids():
        for event in store.read(session_id)[1]:
            if event.type == EventType.SUBAGENT_DESCRIPTOR:
                descriptor = event.decode(SubagentDescriptor)
                models[descriptor.name] = (session_id, descriptor.agent_model)
    assert models["reviewer"][1] == f"scripted:{review_script}"
    assert models["builder"][1] == f"scripted:{lead_script}"  # no pattern matched: the Lead's model
    assert assistant_texts(store, models["reviewer"][0]) == ["reviewer on its own model"]
    assert assistant_texts(store, models["builder"][0]) == ["builder on the lead's model"]
    capsys.readouterr()


@pytest.mark.parametrize("spec, error, code", [
    ("nospec", ConfigError, "CONFIG_INVALID"),
    ("nope:x", ModelError, "MODEL_UNKNOWN"),
])
async def test_a_bad_member_model_fails_at_open(tmp_path: Path, spec: str, error: type[Exception], code: str) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(f'extends = "headless"\n[models]\n"x*" = "{spec}"\n')
    with pytest.raises(error) as info:
        await Host.open(tmp_path / "data", str(profile), _Echo())
    assert info.value.code == code  # type: ignore[attr-defined]
    if code == "CONFIG_INVALID":
        assert "@ models.x*" in str(info.value)
    assert not (tmp_path / "data").exists() or JsonlStore(tmp_path / "data").list_ids() == []


class _Echo:
    def __init__(self, argument: str = "") -> None:
        self.argument = argument
        self.closed = False

    async def complete(self, request: Any) -> dict[str, Any]:
        return {"text": self.argument, "usage": {"input_tokens": 1, "output_tokens": 1}}

    async def aclose(self) -> None:
        self.closed = True


class _SyncClose(_Echo):
    def aclose(self) -> None:  # type: ignore[override]
        self.closed = True


class _BrokenClose(_Echo):
    def aclose(self) -> None:  # type: ignore[override]
        raise RuntimeError("pool already gone")


def _missing() -> Any:
    raise ImportError("No module named 'openai'")


def _no_extra() -> Any:
    raise ExtraNotInstalledError(extra="openai", feature="the openai: model kind", module="openai", reason="absent")


FACTORIES = {"echo": lambda: _Echo, "missing": _missing, "openai": _no_extra, "weird": lambda: (lambda argument: 42)}


class TestResolve:
    def test_kinds(self) -> None:
        assert resolve_spec("echo:hi", factories=FACTORIES).argument == "hi"  # type: ignore[attr-defined]
        with pytest.raises(ModelError, match="failed to import: ImportError: No module named 'openai'") as info:
            resolve_spec("missing:x", factories=FACTORIES)
        assert info.value.code == "MODEL_LOAD_FAILED" and "dsh-team[" not in info.value.message
        with pytest.raises(ExtraNotInstalledError, match=r"pip install 'dsh-team\[openai\]'") as missing:
            resolve_spec("openai:x", factories=FACTORIES)  # a kind's own check of its extra passes through
        assert missing.value.code == "EXTRA_NOT_INSTALLED"
        with pytest.raises(ModelError, match="not a model adapter") as info:
            resolve_spec("weird:x", factories=FACTORIES)
        assert info.value.code == "MODEL_UNKNOWN"
        for bad in ("echo", "echo:", "other:x"):
            with pytest.raises(ModelError, match="available: echo:..., missing:...") as info:
                resolve_spec(bad, factories=FACTORIES)
            assert info.value.code == "MODEL_UNKNOWN"
        with pytest.raises(ModelError, match=r"\(available: none\)"):
            resolve_spec("x:y", factories={})
        assert spec_label("openai:m?tools=constrained&base_url=http://h/v1") == "openai:m"


class _Agent:
    def __init__(self, model: str | None) -> None:
        self.model = model


class _Request:
    def __init__(self, model: str | None) -> None:
        self.agent = _Agent(model)


class TestRoutes:
    async def test_routing_labels_and_close(self) -> None:
        default = _Echo("default")
        routes = ModelRoutes(default, "echo:default", factories=FACTORIES)
        assert await routes.complete(_Request(None)) == {  # type: ignore[arg-type]
            "text": "default", "usage": {"input_tokens": 1, "output_tokens": 1}, "model": "echo:default"}
        recorded = await routes.complete(_Request("echo:member"))  # type: ignore[arg-type]
        assert (recorded["text"], recorded["model"]) == ("member", "echo:member")
        member = routes.adapter_for("echo:member")
        assert routes.adapter_for("echo:member") is member  # resolved once, kept
        routes.add("echo:broken", _BrokenClose())
        synchronous = _SyncClose()
        routes.add("echo:sync", synchronous)
        routes.add("echo:no-close", _NoUsage())  # type: ignore[arg-type]
        with structlog.testing.capture_logs() as logs:
            await routes.close()
        assert default.closed and member.closed and synchronous.closed  # type: ignore[attr-defined]
        assert [entry["event"] for entry in logs] == ["model.close_failed"]

    async def test_a_host_on_an_adapter_object_answers_recorded_specs_with_it(self) -> None:
        default = _Echo("object")
        routes = ModelRoutes(default, None, factories=FACTORIES)
        assert routes.adapter_for("echo:recorded-elsewhere") is default
        reply = await routes.complete(_Request("echo:recorded-elsewhere"))  # type: ignore[arg-type]
        assert reply["model"] == "echo:recorded-elsewhere"
        assert await ModelRoutes(_NoUsage(), None).complete(_Request(None)) == {"text": "x"}  # type: ignore[arg-type]


class _NoUsage:
    async def complete(self, request: Any) -> dict[str, Any]:
        return {"text": "x"}


class TestReplyChecks:
    def test_usage_and_model(self) -> None:
        reply = parse_reply({"text": "t", "usage": {"input_tokens": 3, "output_tokens": 4, "cached_tokens": 1},
                             "model": "openai:m"})
        assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cached_tokens, reply.model) == (  # type: ignore[union-attr]
            3, 4, 1, "openai:m")
        assert parse_reply({"text": "t", "usage": {}}).usage.cached_tokens is None  # type: ignore[union-attr]
        for bad, cause in (({"usage": 3}, "usage must be an object"),
                           ({"usage": {"input_tokens": -1}}, "usage.input_tokens"),
                           ({"usage": {"output_tokens": True}}, "usage.output_tokens"),
                           ({"usage": {"cached_tokens": "2"}}, "usage.cached_tokens"),
                           ({"model": 7}, "model must be a string")):
            with pytest.raises(ModelError, match=cause) as info:
                parse_reply({"text": "", **bad})
            assert info.value.code == "MODEL_BAD_REPLY"
