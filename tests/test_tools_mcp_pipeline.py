"""MCP servers named in pipeline files: ``[[tools.mcp]]`` checked when the file
loads, turned into a toolbox by ``build_parts``, and one turn end to end through
``run_assistant`` (what ``voice-membrane run`` runs): the fake Anthropic server's
scripted reply calls ``get_weather``, the test MCP server runs it, the result
goes back to the model in the second request, and only the narrative and the
final answer are spoken — in chat mode (a native tool use, the stdio server) and
in prefill mode (an XML function call, the HTTP server with a bearer token)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from voice_membrane.cli.main import main
from voice_membrane.cli.run import run_assistant
from voice_membrane.infra.redact import forget_all, redact
from voice_membrane.membrane.tools_mcp import McpServerError
from voice_membrane.pipeline.build import TOOL_ROUND_GRACE_S, build_parts
from voice_membrane.pipeline.config import ConfigError, load_pipeline
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.mcp_weather import McpHttpServer
from voice_membrane.testing.script import ScriptedReply, tool_use

GUARD_S = 60  # against a hang only
STDIO = f'command = ["{sys.executable}", "-m", "voice_membrane.testing.mcp_weather"]'
TOKEN = "mcp-pipeline-token-0123456789"
NARRATIVE = "Let me check the forecast."
ANSWER = "It is sunny in Paris today."
TOOL_OUTPUT = "Paris: sunny, high of 21 °C"


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_ANTHROPIC_KEY", "k")
    forget_all()


def write(tmp_path: Path, text: str, llm: str = "") -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(
        f"""[llm]
spec = "anthropic:claude-test"
api_key_env = "MY_ANTHROPIC_KEY"
{llm}
[tts]
spec = "espeak"
[sink]
kind = "null"
{text}""",
        encoding="utf-8",
    )
    return path


# ------------------------------------------------------------ the file


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("", 'tools.mcp[0]: Value error, give either command = ["program", "arg", …]'),
        (f'{STDIO}\nurl = "http://127.0.0.1:9/mcp"', "tools.mcp[0]: Value error, give either"),
        (f"{STDIO}\nport = 3", "unknown key 'tools.mcp[0].port' (allowed here: name, command"),
        ("command = []", "tools.mcp[0].command: List should have at least 1 item"),
        ('url = "ftp://example.com"', "tools.mcp[0].url: Value error, expected an http://"),
        ('url = "http://h/mcp"\ncwd = "x"', "tools.mcp[0]: Value error, env and cwd are for a"),
        (f'{STDIO}\nbearer_token_env = "T"', "tools.mcp[0]: Value error, headers_env and bearer"),
        (f'{STDIO}\ntool_prefix = "a.b"', "tools.mcp[0].tool_prefix: String should match"),
        (f'{STDIO}\nname = "two words"', "tools.mcp[0].name: String should match pattern"),
    ],
)
def test_a_bad_mcp_table_is_one_line(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_pipeline(write(tmp_path, f"[[tools.mcp]]\n{table}\n"))
    text = str(excinfo.value)
    assert "\n" not in text and text.startswith(f"{tmp_path / 'tools.toml'}: {message}"), text


def test_two_servers_with_one_name_and_bad_tools_keys(tmp_path: Path) -> None:
    twice = f'[[tools.mcp]]\nname = "w"\n{STDIO}\n[[tools.mcp]]\nname = "w"\nurl = "http://h/"\n'
    with pytest.raises(ConfigError, match="two MCP servers are named 'w': give each"):
        load_pipeline(write(tmp_path, twice))
    with pytest.raises(ConfigError, match=r"tools.timeout_s: Input should be greater than 0"):
        load_pipeline(write(tmp_path, "[tools]\ntimeout_s = 0\n"))
    with pytest.raises(ConfigError, match=r"unknown key 'tools.servers' \(allowed here: timeout_s"):
        load_pipeline(write(tmp_path, "[tools]\nservers = []\n"))


def test_build_makes_the_toolbox_cwd_relative_to_the_file_and_the_timeouts(
    tmp_path: Path,
) -> None:
    text = f'[tools]\ntimeout_s = 7\n[[tools.mcp]]\n{STDIO}\ncwd = "servers"\nenv = {{A = "b"}}\n'
    config = load_pipeline(write(tmp_path, text))
    parts = build_parts(config)
    assert parts.toolbox is not None and parts.toolbox.timeout_s == 7
    (server,) = parts.toolbox.servers
    assert server.name == Path(sys.executable).name  # the program's name by default
    assert server.cwd == str(tmp_path / "servers") and dict(server.env) == {"A": "b"}
    # The membrane's limit on a round leaves the toolbox's own per-call limit to act.
    assert parts.membrane.tool_timeout_s == 7 + TOOL_ROUND_GRACE_S
    assert build_parts(load_pipeline(write(tmp_path, ""))).toolbox is None


def test_headers_come_from_the_environment_and_are_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (
        '[[tools.mcp]]\nname = "w"\nurl = "http://127.0.0.1:9/mcp"\n'
        'bearer_token_env = "W_TOKEN"\nheaders_env = { X-Team = "W_TEAM" }\n'
    )
    config = load_pipeline(write(tmp_path, text))
    with pytest.raises(ConfigError) as excinfo:
        build_parts(config)
    assert str(excinfo.value) == "tools.mcp[0] (w): W_TEAM (the X-Team header) is not set"
    monkeypatch.setenv("W_TEAM", "blue-team-9")
    monkeypatch.setenv("W_TOKEN", TOKEN)
    parts = build_parts(config)
    assert parts.toolbox is not None
    (server,) = parts.toolbox.servers
    assert dict(server.headers) == {"X-Team": "blue-team-9", "Authorization": f"Bearer {TOKEN}"}
    assert TOKEN not in repr(server)
    assert redact(f"sent {TOKEN}") == "sent ***"  # in any message from now on


def test_run_stops_with_one_line_naming_a_server_that_will_not_start(tmp_path: Path) -> None:
    path = write(tmp_path, '[[tools.mcp]]\nname = "ghost"\ncommand = ["no-such-mcp-server"]\n')
    with pytest.raises(SystemExit) as excinfo:
        main(["run", "--pipeline", str(path), "--prompt", "hi"])
    assert excinfo.value.code == (
        "voice-membrane run: MCP server 'ghost' (stdio) cannot run 'no-such-mcp-server': "
        "No such file or directory"
    )


# ------------------------------------------------------------ a turn end to end


def first_reply_chat() -> ScriptedReply:
    return ScriptedReply.of(NARRATIVE, tool_use("get_weather", {"city": "Paris"}), delta_chars=5)


def first_reply_prefill() -> ScriptedReply:
    return ScriptedReply.of(
        f'{NARRATIVE}\n<function_calls>\n<invoke name="get_weather">\n'
        '<parameter name="city">Paris</parameter>\n</invoke>\n',
        stop_reason="stop_sequence",
        stop_sequence="</function_calls>",
        delta_chars=5,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["chat", "prefill"])
async def test_a_turn_calls_the_mcp_tool_and_speaks_only_the_narrative_and_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    with (
        McpHttpServer(token=TOKEN) as mcp_http,
        FakeAnthropic(
            first_reply_chat() if mode == "chat" else first_reply_prefill(),
            ScriptedReply.of(ANSWER if mode == "chat" else f"\n{ANSWER}"),
        ) as fake,
    ):
        if mode == "chat":  # a native tool use, run by the stdio server
            llm, server = 'formatter = "native"', f'name = "weather"\n{STDIO}'
        else:  # an XML function call in the prefill, run by the HTTP server
            monkeypatch.setenv("WEATHER_TOKEN", TOKEN)
            llm = 'formatter = "anthropic-xml"'
            server = f'name = "weather"\nurl = "{mcp_http.url}"\nbearer_token_env = "WEATHER_TOKEN"'
        llm += f'\nbase_url = "{fake.base_url}"'
        config = load_pipeline(write(tmp_path, f"[[tools.mcp]]\n{server}\n", llm))
        printed: list[str] = []
        with anyio.fail_after(GUARD_S):
            (result,) = await run_assistant(config, prompt="Weather in Paris?", out=printed.append)
        bodies = [request.body for request in fake.requests]
    assert result.error is None, result.error
    # The tool was offered: in the request's tools (chat), in the system prompt (prefill).
    if mode == "chat":
        assert [t["name"] for t in bodies[0]["tools"]][:1] == ["get_weather"]
    else:
        assert "tools" not in bodies[0] and "get_weather" in json.dumps(bodies[0]["system"])
        assert set(mcp_http.authorizations) == {f"Bearer {TOKEN}"}
    # The MCP server ran it; its result went back to the model in the second request.
    (tool_result,) = [b for b in result.blocks if b.type == "tool_result"]
    assert (tool_result.content, tool_result.is_error) == (TOOL_OUTPUT, False)
    assert len(bodies) == 2 and TOOL_OUTPUT in json.dumps(bodies[1], ensure_ascii=False)
    assert TOOL_OUTPUT not in json.dumps(bodies[0], ensure_ascii=False)
    # Only the narrative and the answer were spoken; the call and its result never.
    assert " ".join(result.spoken_text.split()) == f"{NARRATIVE} {ANSWER}"
    console = "".join(printed)
    assert "starting MCP servers: weather …" in console
    assert "21 °C" not in console and "get_weather" not in console


@pytest.mark.anyio
async def test_a_failing_tool_is_an_error_result_the_model_reads(tmp_path: Path) -> None:
    failing = ScriptedReply.of(NARRATIVE, tool_use("explode", {"reason": "no satellite"}))
    with FakeAnthropic(failing, ScriptedReply.of("Sorry, I could not check.")) as fake:
        llm = f'base_url = "{fake.base_url}"'
        config = load_pipeline(write(tmp_path, f"[[tools.mcp]]\n{STDIO}\n", llm))
        with anyio.fail_after(GUARD_S):
            (result,) = await run_assistant(config, prompt="Weather?", out=lambda text: None)
        second = fake.requests[1].body
    assert result.error is None
    (tool_result,) = [b for b in result.blocks if b.type == "tool_result"]
    assert tool_result.is_error and "no satellite" in (tool_result.content or "")
    sent = [
        block
        for message in second["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert len(sent) == 1 and sent[0]["is_error"] is True
    assert " ".join(result.spoken_text.split()) == f"{NARRATIVE} Sorry, I could not check."


@pytest.mark.anyio
async def test_a_session_that_cannot_start_its_tools_loads_nothing(tmp_path: Path) -> None:
    config = load_pipeline(
        write(tmp_path, '[[tools.mcp]]\nname = "ghost"\ncommand = ["no-such-mcp-server"]\n')
    )
    with pytest.raises(McpServerError, match="MCP server 'ghost'"):
        await run_assistant(config, prompt="hi", out=lambda text: None)


# ------------------------------------------------------------ serve


@pytest.mark.anyio
async def test_serve_a_session_runs_its_tools_and_a_broken_server_fails_the_start(
    tmp_path: Path,
) -> None:
    from tests.serve_helpers import read_turn, send, session
    from voice_membrane.server import Server

    with (
        McpHttpServer() as mcp_http,
        FakeAnthropic(first_reply_chat(), ScriptedReply.of(ANSWER)) as fake,
    ):
        llm = f'base_url = "{fake.base_url}"'
        path = write(tmp_path, f'[[tools.mcp]]\nname = "weather"\nurl = "{mcp_http.url}"\n', llm)
        quiet = {"log": lambda *args, **fields: None}
        with anyio.fail_after(GUARD_S):
            async with Server([path], port=0, **quiet) as server, session(server) as ws:
                await send(ws, type="user.message", text="Weather in Paris?")
                log = await read_turn(ws)
        bodies = [request.body for request in fake.requests]
    assert log.end["error"] is None and log.end["heard"] == f"{NARRATIVE} {ANSWER}"
    results = [e for e in log.of("block") if e["block_type"] == "tool_result"]
    assert results and TOOL_OUTPUT in json.dumps(results, ensure_ascii=False)
    assert len(bodies) == 2 and TOOL_OUTPUT in json.dumps(bodies[1], ensure_ascii=False)

    broken = write(tmp_path, '[[tools.mcp]]\nname = "ghost"\ncommand = ["no-such-mcp-server"]\n')
    with pytest.raises(McpServerError, match="MCP server 'ghost'"):
        async with Server([broken], port=0, **quiet):
            pass


# ------------------------------------------------------------ a session with both kinds of tools


@pytest.mark.anyio
async def test_a_session_with_a_toolbox_and_python_tools_sends_each_call_to_its_own(
    tmp_path: Path,
) -> None:
    from voice_membrane.membrane.membrane import Membrane
    from voice_membrane.membrane.tools import tool_handler
    from voice_membrane.membrane.tools_mcp import McpServer, McpToolbox
    from voice_membrane.pipeline.session import Session
    from voice_membrane.providers.anthropic import AnthropicProvider
    from voice_membrane.sinks.null import NullSink
    from voice_membrane.tts.espeak import EspeakEngine
    from voice_membrane.vocab.messages import ModelConfig, ToolDefinition

    both = ScriptedReply.of(
        NARRATIVE,
        tool_use("get_weather", {"city": "Paris"}),
        tool_use("get_time", {"city": "Paris"}),
    )
    with (
        McpHttpServer() as mcp_http,
        FakeAnthropic(both, ScriptedReply.of(ANSWER)) as fake,
    ):
        local = ToolDefinition(name="get_time", description="The local time in a city.")
        session = Session(
            Membrane(AnthropicProvider(api_key="k", base_url=fake.base_url)),
            EspeakEngine(),
            NullSink(),
            model=ModelConfig(model="claude-test"),
            tools=[local],
            on_tool_calls=tool_handler({"get_time": lambda city: f"{city}: 14:05"}),
            toolbox=McpToolbox([McpServer("weather", url=mcp_http.url)]),
        )
        with anyio.fail_after(GUARD_S):
            async with session:
                result = await session.turn("Weather and time in Paris?")
        bodies = [request.body for request in fake.requests]
    offered = [tool["name"] for tool in bodies[0]["tools"]]
    assert offered[:2] == ["get_time", "get_weather"]
    results = {b.tool_name: b.content for b in result.blocks if b.type == "tool_result"}
    assert results == {"get_weather": TOOL_OUTPUT, "get_time": "Paris: 14:05"}
    second = json.dumps(bodies[1], ensure_ascii=False)
    assert TOOL_OUTPUT in second and "Paris: 14:05" in second
    assert " ".join(result.spoken_text.split()) == f"{NARRATIVE} {ANSWER}"
