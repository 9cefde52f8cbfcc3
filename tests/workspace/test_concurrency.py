"""Two members editing one file: exactly one FILE_STALE, and no update is ever lost.

The oracle for the guard is a naive model: it remembers, per agent, the last
content that agent read or wrote, and the file's content; a change is accepted
exactly when the agent's remembered content equals the file's. Hypothesis
drives random interleavings of reads, edits, whole-file writes and external
writes through the real tools and checks every verdict and the final bytes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import given, settings, strategies as st
from workspace_kit import agent_in, call, open_host


async def test_two_members_racing_on_one_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    target = ws / "shared.py"
    target.write_text("A = 0\nB = 0\n")

    host = await open_host(tmp_path / "data")
    try:
        one = await agent_in(host, ws, "one")
        two = await agent_in(host, ws, "two")
        await asyncio.gather(call(host, one, "read_file", path="shared.py"),
                             call(host, two, "read_file", path="shared.py"))
        race = await asyncio.gather(
            call(host, one, "edit_file", path="shared.py", old_string="A = 0", new_string="A = 1"),
            call(host, two, "edit_file", path="shared.py", old_string="B = 0", new_string="B = 2"),
        )
        loser = two if race[0].ok else one
        retry_old, retry_new = ("B = 0", "B = 2") if loser is two else ("A = 0", "A = 1")
        await call(host, loser, "read_file", path="shared.py")
        retry = await call(host, loser, "edit_file", path="shared.py", old_string=retry_old, new_string=retry_new)
        race, retry = race, retry
    finally:
        await host.close()
    assert sorted(str(r.code) for r in race) == ["FILE_STALE", "None"]
    stale = next(r for r in race if not r.ok)
    assert "changed since you read it" in stale.message
    assert retry.ok and target.read_text() == "A = 1\nB = 2\n"


ops = st.lists(
    st.tuples(st.sampled_from(["read", "edit", "write", "external"]), st.integers(0, 2)), min_size=1, max_size=14
)


@settings(max_examples=25, deadline=None)
@given(ops)
def test_the_guard_matches_a_naive_model(tmp_path_factory, script) -> None:
    base = tmp_path_factory.mktemp("race")
    ws = base / "ws"
    ws.mkdir()
    target = ws / "f.txt"
    target.write_text("v0\n")

    async def main():
        host = await open_host(base / "data")
        try:
            agents = [await agent_in(host, ws, f"agent-{i}") for i in range(3)]
            seen: dict[int, str] = {}
            content = "v0\n"
            for step, (op, who) in enumerate(script, 1):
                new = f"v{step}\n"
                if op == "external":
                    target.write_text(new)
                    content = new
                    continue
                agent = agents[who]
                if op == "read":
                    assert (await call(host, agent, "read_file", path="f.txt")).ok
                    seen[who] = content
                    continue
                if op == "edit":
                    result = await call(host, agent, "edit_file", path="f.txt", old_string=content.strip(),
                                        new_string=new.strip())
                else:
                    result = await call(host, agent, "write_file", path="f.txt", content=new)
                expected_ok = seen.get(who) == content
                assert result.ok == expected_ok, (step, op, who, result)
                if not expected_ok:
                    assert result.code == ("FILE_NOT_READ" if who not in seen else "FILE_STALE")
                else:
                    content = new
                    seen[who] = new
                assert target.read_text() == content
        finally:
            await host.close()

    asyncio.run(main())  # hypothesis drives a plain function: one fresh loop per example
