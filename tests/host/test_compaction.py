"""Compaction: near the model's window older turns become one durable summary record.

The oracles here read the log directly (the documented derivation: first message,
summary, surface events from ``kept_from_seq``), never the agent's incremental fold.
"""

from __future__ import annotations

import asyncio
import random
import re
from pathlib import Path
from typing import Any

import pytest

from _agent_kit import echo_tool, find, make_kit, memory_session
from host_spec.errors import ConfigError, ModelError
from host_spec.events import ContextCompaction, EventType, json_encode
from host_spec.host.agents.compaction import (
    BYTES_PER_TOKEN,
    MESSAGE_CAP,
    SUMMARY_SYSTEM,
    choose_cut,
    pinned_index,
    transcript,
)
from host_spec.host.agents.context import SUMMARY_HEADER, ContextEntry, Conversation
from host_spec.host.agents.window import CompactionSettings
from host_spec.host.models.adapter import positive_tokens
from host_spec.host.models.adapter import tool_definitions
from host_spec.host.models.registry import ModelRoutes
from host_spec.host.models.scripted import SUMMARY_PREFIX, ScriptedModel, scripted_summary
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.sessions import SessionStore
from host_spec.host.plugins.profiles import load_profile
from host_spec.messages import message_text, user_message
from host_spec.config import structure_config

WINDOW = 1500  # tokens: the echo tool's schema plus about five steps of ~400-byte arguments


def long_script(steps: int, *, name: str = "w") -> dict[str, Any]:
    """``steps`` echo calls, each carrying a marked ~400-byte text, then a final answer."""
    calls = [{"tool_calls": [{"name": "echo", "arguments": {"text": f"[m{i}] " + "x" * 400}}]} for i in range(steps)]
    return {name: [*calls, {"text": "all done"}]}


def as_message(event: Any) -> dict[str, Any] | None:
    """The documented event -> message mapping (the oracle's own, from the log)."""
    value = event.value()
    if event.type == EventType.USER_MESSAGE:
        return value
    if event.type == EventType.ASSISTANT_MESSAGE:
        return {"role": "assistant", **value} if value.get("content") else None
    if event.type == EventType.TOOL_RESULT:
        return {"role": "tool", **value}
    return None


def surface(events: Any, start: int = 0, stop: int | None = None) -> list[tuple[Any, dict[str, Any]]]:
    found = []
    for event in events:
        if event.seq >= start and (stop is None or event.seq < stop):
            message = as_message(event)
            if message is not None:
                found.append((event, message))
    return found


def compactions(session: Any) -> list[tuple[Any, ContextCompaction]]:
    return [(e, e.decode(ContextCompaction)) for e in session.events if e.type == EventType.CONTEXT_COMPACTED]


def expected_context(session: Any, event: Any, record: ContextCompaction) -> list[dict[str, Any]]:
    """First message + summary + surface events kept verbatim, read from the log alone."""
    first = next(m for e, m in surface(session.events) if e.seq == record.first_seq)
    kept = [m for e, m in surface(session.events, record.kept_from_seq, event.seq) if e.seq != record.first_seq]
    return [first, {"id": f"compaction-{event.seq}", "role": "user", "source": {"kind": "compaction", "seq": event.seq},
                    "content": [{"type": "text", "text": SUMMARY_HEADER + record.summary + "\n</system-reminder>"}]},
            *kept]


def calls_answered(messages: list[dict[str, Any]]) -> bool:
    """Every tool result follows the assistant message that made its call."""
    seen: set[str] = set()
    for message in messages:
        if message.get("role") == "assistant":
            seen |= {b["id"] for b in message["content"] if b.get("type") == "tool-call"}
        elif message.get("role") == "tool" and message["call_id"] not in seen:
            return False
    return True


def kit_for(script: dict[str, Any], *, window: int | None = WINDOW, settings: CompactionSettings | None = None,
            model: Any = None) -> Any:
    kit = make_kit(model=model if model is not None else ScriptedModel.from_mapping(script, context_window=window))
    kit.tools.register(echo_tool())
    if settings is not None:
        kit.registry.runtime.compaction = settings
    return kit


async def run(kit: Any, prompt: str = "[first] do the long job", session: Any = None, name: str = "w") -> Any:
    agent = kit.registry.create(session if session is not None else memory_session("a"), name=name)
    agent.followup(user_message(prompt, id="prompt-1"))
    await agent.when_idle()
    return agent


class TestCompactionInATurn:
    async def test_a_long_session_compacts_once_at_the_threshold(self) -> None:
        """The step that crosses 0.8 of the window compacts; the next request is exactly
        first message + summary + the recent turns, every tool call still with its result."""
        kit = kit_for(long_script(6))
        agent = await run(kit)
        ((event, record),) = compactions(agent.session)
        requests = kit.model.requests
        index = next(i for i, r in enumerate(requests) if r.purpose == "compaction")
        summary_request, after = requests[index], requests[index + 1]
        assert summary_request.system == SUMMARY_SYSTEM and summary_request.tools == ()
        assert list(after.messages) == expected_context(agent.session, event, record)
        assert calls_answered(list(after.messages))
        assert after.messages[0]["content"][0]["text"] == "[first] do the long job"
        # The estimate is what the bytes say, measured independently from the log.
        fixed = len(json_encode(tool_definitions(list(kit.tools.visible(agent)))))
        before = sum(len(e.data) for e, _ in surface(agent.session.events, 0, event.seq))
        assert record.estimated_tokens == (fixed + before) // BYTES_PER_TOKEN >= 0.8 * WINDOW
        previous = requests[index - 1]  # the step before did not cross the threshold
        prior = sum(len(json_encode(m)) for m in previous.messages)
        assert (fixed + prior) // BYTES_PER_TOKEN < 0.8 * WINDOW
        assert record.window == WINDOW and record.summarised == len(surface(agent.session.events, 0, event.seq)) - len(
            after.messages) + 1

    async def test_the_summary_covers_exactly_the_older_turns(self) -> None:
        """The scripted summary names each summarised message; the kept ones are not in it."""
        kit = kit_for(long_script(6))
        agent = await run(kit)
        ((event, record),) = compactions(agent.session)
        assert record.summary.startswith(SUMMARY_PREFIX)
        summarised = [m for e, m in surface(agent.session.events, 0, record.kept_from_seq) if e.seq != record.first_seq]
        kept = [m for _, m in surface(agent.session.events, record.kept_from_seq, event.seq)]
        markers = lambda text: set(re.findall(r"\[m\d+\]", text))  # noqa: E731
        older = markers(json_encode(summarised).decode())
        assert older and markers(record.summary) == older
        assert markers(json_encode(kept).decode()) and not markers(json_encode(kept).decode()) & older
        assert "[first]" not in record.summary  # the first message is kept, not summarised

    async def test_the_log_keeps_every_event(self) -> None:
        """Compaction only appends: every surface event of the run is still in the log."""
        kit = kit_for(long_script(6))
        agent = await run(kit)
        plain = await run(kit_for(long_script(6), window=None), session=memory_session("b"))
        types = lambda s: [e.type for e in s.events if e.type != EventType.CONTEXT_COMPACTED]  # noqa: E731
        assert types(agent.session) == types(plain.session)
        assert [m for _, m in surface(agent.session.events)] == [m for _, m in surface(plain.session.events)]

    async def test_a_second_compaction_supersedes_the_first(self) -> None:
        """A longer run compacts again; the new summary was written from the old one, which leaves the context."""
        kit = kit_for(long_script(14))
        agent = await run(kit)
        found = compactions(agent.session)
        assert len(found) >= 2
        (first_event, first), (event, second) = found[0], found[1]
        assert second.kept_from_seq > first.kept_from_seq and second.first_seq == first.first_seq
        assert "earlier summary: " + SUMMARY_HEADER.splitlines()[0] in second.summary
        index = [i for i, r in enumerate(kit.model.requests) if r.purpose == "compaction"][1]
        assert list(kit.model.requests[index + 1].messages) == expected_context(agent.session, event, second)
        assert list(agent.messages())[:2] == expected_context(agent.session, *found[-1])[:2]

    async def test_no_window_means_no_compaction(self) -> None:
        """A model with no known window is never compacted (and a fresh agent gets no brief)."""
        kit = kit_for(long_script(6), window=None)
        kit.hooks.brief_text = "BRIEF"
        agent = await run(kit)
        assert compactions(agent.session) == []
        assert all(r.purpose == "step" for r in kit.model.requests)
        assert all("BRIEF" not in json_encode(list(r.messages)).decode() for r in kit.model.requests)

    async def test_a_configured_window_wins_over_the_adapter(self) -> None:
        """``windows`` patterns match the agent's spec; the first match beats the adapter's own."""
        settings = CompactionSettings(windows={"other:*": 10, "scripted:*": WINDOW})
        kit = kit_for(long_script(6), window=None, settings=settings)
        agent = kit.registry.create(memory_session("a"), name="w", model="scripted:x.json")
        agent.followup(user_message("[first] go"))
        await agent.when_idle()
        assert len(compactions(agent.session)) == 1
        assert settings.window(None, ScriptedModel({}, context_window=7)) == 7

    async def test_reported_usage_drives_the_estimate(self) -> None:
        """Usage a model reported after the newest compaction beats the byte heuristic."""

        class Costly(ScriptedModel):
            async def complete(self, request: Any) -> Any:
                reply = await super().complete(request)
                return {**reply, "usage": {"input_tokens": 4000 * len(request.messages), "output_tokens": 10}}

        model = Costly(ScriptedModel.from_mapping(long_script(3)).steps, context_window=20_000)
        kit = kit_for({}, model=model)
        agent = await run(kit)
        ((event, record),) = compactions(agent.session)
        prior = [e for e in agent.session.events if e.type == EventType.ASSISTANT_MESSAGE and e.seq < event.seq][-1]
        usage = prior.value()["usage"]
        since = sum(len(e.data) for e, _ in surface(agent.session.events, prior.seq + 1, event.seq))
        assert record.estimated_tokens == usage["input_tokens"] + usage["output_tokens"] + since // BYTES_PER_TOKEN
        assert record.estimated_tokens >= 0.8 * 20_000 > len(json_encode(list(agent.messages()))) // BYTES_PER_TOKEN

    async def test_a_failed_summary_leaves_no_record_and_the_step_goes_on(self) -> None:
        """A summary call that fails (or answers nothing) is logged; the turn completes uncompacted."""

        class Failing(ScriptedModel):
            empty: bool = False

            async def complete(self, request: Any) -> Any:
                if request.purpose == "compaction":
                    if self.empty:
                        return {"text": "  "}
                    raise ModelError("the server is down", code="MODEL_UNAVAILABLE")
                return await super().complete(request)

        for empty in (False, True):
            model = Failing(ScriptedModel.from_mapping(long_script(6)).steps, context_window=WINDOW)
            model.empty = empty
            agent = await run(kit_for({}, model=model))
            assert compactions(agent.session) == []
            assert find(agent.session, EventType.TURN_END)[-1]["reason"] == {"kind": "completed"}
            assert message_text(find(agent.session, EventType.ASSISTANT_MESSAGE)[-1]["content"]) == "all done"

    async def test_an_abort_during_the_summary_writes_nothing(self) -> None:
        """Cancelling while the summary is asked for ends the turn aborted, with no record."""
        entered = asyncio.Event()

        class Slow(ScriptedModel):
            async def complete(self, request: Any) -> Any:
                if request.purpose == "compaction":
                    entered.set()
                    await asyncio.Event().wait()
                return await super().complete(request)

        from host_spec.records import CancelCause

        model = Slow(ScriptedModel.from_mapping(long_script(6)).steps, context_window=WINDOW)
        kit = kit_for({}, model=model)
        agent = kit.registry.create(memory_session("a"), name="w")
        agent.followup(user_message("[first] go"))
        await asyncio.wait_for(entered.wait(), 30)
        agent.cancel(CancelCause("user"))
        await agent.when_idle()
        assert compactions(agent.session) == []
        assert find(agent.session, EventType.TURN_END)[-1]["reason"]["kind"] == "aborted"


class TestBriefPlacement:
    async def test_a_compacted_context_ends_with_the_brief(self) -> None:
        """After compaction every request ends with the hooks' brief, in a system reminder, never logged."""
        kit = kit_for(long_script(6))
        kit.hooks.brief_text = "  you are w  "
        agent = await run(kit)
        ((event, record),) = compactions(agent.session)
        index = next(i for i, r in enumerate(kit.model.requests) if r.purpose == "compaction")
        after = list(kit.model.requests[index + 1].messages)
        assert after[:-1] == expected_context(agent.session, event, record)
        assert after[-1] == {"id": "context-brief", "role": "user", "source": {"kind": "context-brief"},
                             "content": [{"type": "text", "text": "<system-reminder>\nyou are w\n</system-reminder>"}]}
        assert all(r.messages[-1]["id"] == "context-brief" for r in kit.model.requests[index + 1:])
        assert all("you are w" not in json_encode(e).decode() for e in agent.session.events)

    async def test_a_failing_or_empty_brief_is_left_out(self) -> None:
        """A brief hook that raises or answers nothing adds nothing; the run is unaffected."""
        for fail in (True, False):
            kit = kit_for(long_script(6))
            if fail:
                kit.hooks.fail.add("brief")
            agent = await run(kit)
            assert len(compactions(agent.session)) == 1
            assert all(m.get("id") != "context-brief" for r in kit.model.requests for m in r.messages)

    async def test_a_cold_resumed_agent_gets_the_brief(self, tmp_path: Path) -> None:
        """A resumed agent's requests end with the brief even without a compaction."""
        store = SessionStore(JsonlStore(tmp_path), None)
        kit = make_kit({"w": [{"text": "first"}, {"text": "second"}]})
        agent = await run(kit, session=store.create("w1"))
        await kit.registry.dispose(agent)
        await store.dispose(agent.session)
        again = SessionStore(JsonlStore(tmp_path), None)
        kit2 = make_kit({"w": [{"text": "first"}, {"when": "state now", "text": "gated"}, {"text": "second"}]})
        kit2.hooks.brief_text = "state now"
        resumed = kit2.registry.create(again.resume("w1"), name="w", source="resume")
        assert resumed.resumed and not agent.resumed
        resumed.followup(user_message("more"))
        await resumed.when_idle()
        (request,) = kit2.model.requests
        assert request.messages[-1]["source"] == {"kind": "context-brief"}
        assert [m["role"] for m in request.messages[:-1]] == ["user", "assistant", "user"]
        assert request.reply["text"] == "(waiting)"  # the brief never opens a when-gate nor counts as a step
        await kit2.registry.dispose(resumed)
        await again.dispose(resumed.session)


class TestResumeReusesTheRecord:
    async def test_a_resumed_context_is_the_compacted_one(self, tmp_path: Path) -> None:
        """A cold resume folds the stored compaction: same context, no second summary."""
        store = SessionStore(JsonlStore(tmp_path), None)
        kit = kit_for(long_script(6))
        agent = await run(kit, session=store.create("w1"))
        ((event, record),) = compactions(agent.session)
        before = list(agent.messages())
        await kit.registry.dispose(agent)
        await store.dispose(agent.session)
        again = SessionStore(JsonlStore(tmp_path), None)
        kit2 = kit_for(long_script(6))
        resumed = kit2.registry.create(again.resume("w1"), name="w", source="resume")
        assert list(resumed.messages()) == before
        assert before == expected_context(resumed.session, event, record) + [
            m for _, m in surface(resumed.session.events, event.seq)]
        await kit2.registry.dispose(resumed)
        await again.dispose(resumed.session)


def entry(seq: int, role: str, *, size: int = 10, calls: tuple[str, ...] = (), call_id: str = "",
          summary: bool = False) -> ContextEntry:
    if role == "assistant":
        message: dict[str, Any] = {"role": role, "content": [{"type": "tool-call", "id": c} for c in calls]}
    elif role == "tool":
        message = {"role": role, "call_id": call_id, "content": []}
    else:
        message = {"role": role, "content": []}
    return ContextEntry(seq, message, size, summary=summary)


def random_context(rng: random.Random) -> list[ContextEntry]:
    """A context the loop could produce: steps of user messages, one assistant, its results."""
    entries = [entry(1, "user", size=rng.randint(1, 50))]
    if rng.random() < 0.3:
        entries.append(entry(2, "user", size=rng.randint(1, 50), summary=True))
    seq = 10
    for _ in range(rng.randint(0, 8)):
        for _ in range(rng.choice((0, 0, 1, 2))):
            seq += 1
            entries.append(entry(seq, "user", size=rng.randint(1, 50)))
        calls = tuple(f"c{seq}.{i}" for i in range(rng.choice((0, 1, 1, 2, 3))))
        seq += 1
        entries.append(entry(seq, "assistant", size=rng.randint(1, 50), calls=calls))
        for call in rng.sample(calls, len(calls)):
            seq += 1
            entries.append(entry(seq, "tool", size=rng.randint(1, 50), call_id=call))
    return entries


def naive_cut(entries: list[ContextEntry], budget: int) -> int | None:
    """The rule spelt out: safe cuts after the first message with something new before them;
    the earliest fitting one, else the newest."""
    def call_index(call_id: str) -> int:
        return next(i for i, e in enumerate(entries) if e.role == "assistant"
                    and call_id in {b["id"] for b in e.message["content"]})

    safe = [i for i in range(1, len(entries)) if entries[i].role != "tool"
            and all(call_index(e.message["call_id"]) >= i for e in entries[i:] if e.role == "tool")
            and any(not e.summary for e in entries[1:i])]
    if not safe:
        return None
    fitting = [i for i in safe if sum(e.size for e in entries[i:]) <= budget]
    return min(fitting) if fitting else max(safe)


class TestCutRule:
    def test_the_cut_matches_the_naive_rule(self) -> None:
        """On 3000 random loop-shaped contexts the cut equals the naive search's."""
        rng = random.Random(15)
        for _ in range(3000):
            entries = random_context(rng)
            budget = rng.randint(0, 300)
            assert choose_cut(entries, 0, budget) == naive_cut(entries, budget), entries

    def test_nothing_new_to_summarise_means_no_cut(self) -> None:
        """Only the first message and an earlier summary before the newest step: nothing to do."""
        entries = [entry(1, "user"), entry(5, "user", summary=True), entry(6, "assistant", calls=("a",)),
                   entry(7, "tool", call_id="a")]
        assert choose_cut(entries, 0, 0) is None
        assert choose_cut([entry(1, "user")], 0, 100) is None

    def test_the_pinned_message_is_the_sessions_own_first(self) -> None:
        """A fork's inherited prefix is summarised; its own first user message is kept."""
        entries = [entry(1, "user"), entry(2, "assistant"), entry(5, "user", summary=True), entry(7, "user")]
        assert pinned_index(entries, 0) == 0
        assert pinned_index(entries, 3) == 3
        assert pinned_index(entries, 9) == 0

    def test_the_transcript_marks_roles_and_cuts_long_texts(self) -> None:
        """Each message is one block by role; a long text is cut; the scripted digest lists the blocks."""
        first = ContextEntry(1, {"role": "user", "content": [{"type": "text", "text": "task"}]}, 4)
        long = "y" * (MESSAGE_CAP + 50)
        summarised = [
            ContextEntry(2, {"role": "user", "content": [{"type": "text", "text": "old summary"}]}, 4, summary=True),
            ContextEntry(3, {"role": "assistant", "content": [{"type": "text", "text": "thinking"}, {
                "type": "tool-call", "id": "c", "name": "echo", "arguments": '{"text":"hi"}'}]}, 4),
            ContextEntry(4, {"role": "tool", "name": "echo", "is_error": True, "call_id": "c",
                             "content": [{"type": "text", "text": long}]}, 4),
        ]
        text = transcript(first, summarised)
        assert text.split("\n\n") == [
            "[first message, kept verbatim] user: task", "earlier summary: old summary",
            'assistant: thinking\n  called echo {"text":"hi"}', "tool result echo (error): " + "y" * MESSAGE_CAP + " [...]"]
        digest = scripted_summary([{"role": "user", "content": [{"type": "text", "text": text}]}])
        assert digest.splitlines() == [SUMMARY_PREFIX, "earlier summary: old summary", "assistant: thinking",
                                       "tool result echo (error): " + "y" * 54]


class TestSettings:
    def test_defaults_and_bad_values(self) -> None:
        """Shares must be in (0, 1] with recent below threshold; windows positive; errors name the field."""
        assert CompactionSettings() == CompactionSettings(0.8, 0.25, {})
        for raw, where in (({"threshold": 0}, "threshold must"), ({"threshold": 1.5}, "threshold must"),
                           ({"recent_share": 0.9}, "recent_share must"), ({"windows": {"a:*": 0}}, "windows.a:"),
                           ({"windows": {"a:*": "x"}}, "expected an integer"), ({"treshold": 0.5}, "treshold")):
            with pytest.raises(ConfigError, match=where) as raised:
                structure_config(CompactionSettings, raw, "compaction")
            assert raised.value.path.startswith("compaction"), raw

    def test_profile_layers_merge_keys_and_windows(self, tmp_path: Path) -> None:
        """A later layer overrides keys one by one and adds window patterns; a bad table names its file."""
        base = tmp_path / "base.toml"
        base.write_text('extends = "headless"\n[compaction]\nthreshold = 0.7\n[compaction.windows]\n"a:*" = 100\n')
        top = tmp_path / "top.toml"
        top.write_text('extends = "base.toml"\n[compaction]\nrecent_share = 0.2\n[compaction.windows]\n"b:*" = 200\n')
        profile = load_profile(top)
        assert profile.compaction == CompactionSettings(0.7, 0.2, {"a:*": 100, "b:*": 200})
        assert load_profile("headless").compaction == CompactionSettings()
        bad = tmp_path / "bad.toml"
        bad.write_text('extends = "base.toml"\n[compaction]\nrecent_share = 0.75\n')
        with pytest.raises(ConfigError, match="bad.toml.*recent_share must"):
            load_profile(bad)
        odd = tmp_path / "odd.toml"
        odd.write_text('extends = "base.toml"\n[compaction]\nwindows = 5\n')
        with pytest.raises(ConfigError, match="odd.toml"):
            load_profile(odd)

    async def test_model_routes_report_the_adapters_window(self) -> None:
        """Routes ask the agent's own adapter; an unresolvable spec reports none."""
        routes = ModelRoutes(ScriptedModel({}, context_window=123), "scripted:a.json", factories={})
        assert routes.window_for(None) == 123 and routes.window_for("scripted:a.json") == 123
        routes.add("other:b", ScriptedModel({}))
        assert routes.window_for("other:b") is None
        assert routes.window_for("missing:c") is None
        assert [positive_tokens(v) for v in (5, 0, -1, True, "5", None)] == [5, None, None, None, None, None]


class TestConversationFold:
    def test_a_compaction_event_drops_the_summarised_entries(self) -> None:
        """Folding ``context/compacted`` keeps first + summary + kept and recomputes the size."""
        session = memory_session("c")
        session.append(EventType.USER_MESSAGE, user_message("first", id="u1"))
        session.append(EventType.USER_MESSAGE, user_message("old", id="u2"))
        session.append(EventType.USER_MESSAGE, user_message("recent", id="u3"))
        conversation = Conversation(session)
        conversation.fold()
        seqs = [e.seq for e in conversation.entries]
        session.append(EventType.CONTEXT_COMPACTED, ContextCompaction(
            version=1, summary="S", first_seq=seqs[0], kept_from_seq=seqs[2], summarised=1, estimated_tokens=9, window=10))
        conversation.fold()
        entries = conversation.entries
        assert [message_text(e.message["content"]) for e in entries] == [
            "first", SUMMARY_HEADER + "S\n</system-reminder>", "recent"]
        assert conversation.size == sum(e.size for e in entries) and entries[1].summary


class TestBriefHook:
    async def test_the_host_joins_every_plugins_text_and_contains_failures(self, tmp_path: Path) -> None:
        """``dsh_context_brief`` answers are joined in call order; ``None``, blanks and a raising plugin drop out."""
        from host_spec import hookimpl
        from host_spec.host.app import Host
        from host_spec.host.agents.runtime import NullHooks

        class Answer:
            def __init__(self, text: Any) -> None:
                self.text = text

            @hookimpl
            def dsh_context_brief(self, agent: Any) -> Any:
                if isinstance(self.text, Exception):
                    raise self.text
                return self.text

        plugins = [("a", Answer(" first ")), ("b", Answer(None)), ("c", Answer(RuntimeError("bug"))),
                   ("d", Answer("  ")), ("e", Answer(7)), ("f", Answer("second"))]
        host = await Host.open(tmp_path, None, ScriptedModel({}), extra_plugins=plugins)
        try:
            agent = host.start_agent(await host.create_session("x"), name="x")
            assert set(host.brief(agent).split("\n\n")) == {"first", "second"}
        finally:
            await host.close()
        assert NullHooks().brief(agent) == ""

    async def test_above_the_threshold_with_nothing_to_summarise_nothing_happens(self) -> None:
        """A window the first request already overflows cannot be helped by a summary: no compaction."""
        kit = kit_for({"w": [{"text": "done"}]}, window=10)
        agent = await run(kit)
        assert compactions(agent.session) == []
        assert [r.purpose for r in kit.model.requests] == ["step"]


def test_the_transcript_shows_a_compaction() -> None:
    """``dsh run`` prints one line per compaction (the summary itself stays in the log)."""
    from host_spec.host.cli.transcript import render_event

    session = memory_session("t")
    event = session.append(EventType.CONTEXT_COMPACTED, ContextCompaction(
        version=1, summary="S", first_seq=1, kept_from_seq=3, summarised=4, estimated_tokens=1234, window=1500))
    assert render_event("w", event) == ["[w] (context compacted: 4 messages summarised at ~1234 of 1500 tokens)"]
