"""``dsh acp`` at its edges, over the protocol: typed errors the editor can show, the editor's MCP servers.

Every refusal is a JSON-RPC error whose data names the stable code
(``docs/error-codes.md``) and writes nothing; the agent keeps serving after it.
The editor's ``mcpServers`` join the profile's: a scripted Lead calls the tool of a
real MCP server (``examples/mcp_server.py`` over stdio) that only the editor named.
Without the ``acp`` extra, ``dsh acp`` stops at once with ``EXTRA_NOT_INSTALLED``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from acp import RequestError
from acp.schema import ImageContentBlock, McpServerStdio
from kit_acp import REPO, Editor, agent, initialized, prompt

pytestmark = pytest.mark.slow


async def test_refusals_are_typed_and_the_agent_goes_on(tmp_path: Path) -> None:
    data, workspace = tmp_path / "data", tmp_path / "workspace"
    workspace.mkdir()
    async with agent(Editor(), data, log=tmp_path / "agent.log") as (conn, _):  # no --model
        await initialized(conn)
        with pytest.raises(RequestError) as no_model:
            await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert no_model.value.data == {"code": "CLI_USAGE"} and "--model" in str(no_model.value)
        assert not data.exists()  # nothing was written
        with pytest.raises(RequestError) as unknown:
            await conn.load_session(cwd=str(workspace), session_id="session-9", mcp_servers=[])
        assert unknown.value.data == {"code": "DATA_DIR_NOT_FOUND"}
    script = tmp_path / "lead.json"
    script.write_text(json.dumps({"lead": [{"text": "hello"}]}))
    async with agent(Editor(), data, "--model", f"scripted:{script}", log=tmp_path / "agent.log") as (conn, _):
        await initialized(conn)
        with pytest.raises(RequestError) as no_dir:
            await conn.new_session(cwd=str(tmp_path / "missing"), mcp_servers=[])
        assert no_dir.value.data == {"code": "WORKSPACE_NOT_FOUND"}
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        with pytest.raises(RequestError) as not_found:
            await conn.load_session(cwd=str(workspace), session_id="session-9", mcp_servers=[])
        assert not_found.value.data == {"code": "SESSION_NOT_FOUND"}
        with pytest.raises(RequestError) as image:
            await conn.prompt(session_id=session.session_id,
                              prompt=[ImageContentBlock(type="image", data="AAAA", mime_type="image/png")])
        assert image.value.code == -32602 and "text prompts only" in str(image.value.data)
        with pytest.raises(RequestError) as closed:
            await prompt(conn, "session-7", "hello?")
        assert closed.value.code == -32602
        assert (await prompt(conn, session.session_id, "hi")).stop_reason == "end_turn"


@pytest.mark.timeout_s(90)
async def test_the_editors_mcp_servers_join_the_profiles(tmp_path: Path) -> None:
    data, workspace = tmp_path / "data", tmp_path / "workspace"
    workspace.mkdir()
    script = tmp_path / "lead.json"
    script.write_text(json.dumps({"lead": [
        {"text": "Asking the editor's glossary.",
         "tool_calls": [{"name": "mcp__glossary__define", "arguments": {"term": "lease"}}]},
        {"text": "Defined."},
    ]}))
    glossary = McpServerStdio(name="glossary", command=sys.executable, args=[str(REPO / "examples" / "mcp_server.py")],
                              env=[])
    editor = Editor()
    async with agent(editor, data, "--model", f"scripted:{script}", log=tmp_path / "agent.log") as (conn, _):
        await initialized(conn)
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[glossary])
        assert (await prompt(conn, session.session_id, "what is a lease?")).stop_reason == "end_turn"
    call = next(c for c in editor.tool_calls().values() if c["title"] == "lead: mcp__glossary__define")
    assert call["statuses"][-1] == "completed"
    assert "A member session has one holder at a time" in call["text"]


def test_without_the_extra_the_command_names_the_install(tmp_path: Path) -> None:
    blocked = ("import sys; sys.modules['acp'] = None  # the SDK cannot be imported\n"
               "from host_spec.host.cli.main import main; sys.exit(main(['acp', '--data-dir', sys.argv[1]]))")
    result = subprocess.run([sys.executable, "-c", blocked, str(tmp_path / "data")], capture_output=True, text=True,
                            cwd=REPO, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert result.stdout == ""  # stdout is the protocol's: nothing else ever goes there
    assert "dsh: EXTRA_NOT_INSTALLED:" in result.stderr and "pip install 'dsh-team[acp]'" in result.stderr
