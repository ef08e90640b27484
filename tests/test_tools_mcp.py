"""McpToolbox against the test MCP server (``voice_membrane.testing.mcp_weather``),
over stdio (a subprocess) and over streamable HTTP on loopback: listing, calls,
error results, timeouts, servers that will not start, clashing names, a server
lost mid-session; and ``tools.by_name``.

One toolbox per transport serves the module (a stdio server costs a Python
start-up): it runs in a blocking portal's event loop, opened and closed in one
task of it, as a session would."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from voice_membrane.membrane.tools import (
    OnToolCalls,
    ToolCall,
    ToolOutput,
    by_name,
    run_tool_calls,
)
from voice_membrane.membrane.tools_mcp import McpServer, McpServerError, McpToolbox
from voice_membrane.testing.mcp_weather import McpHttpServer
from voice_membrane.vocab.messages import ToolResultContent

WEATHER = (sys.executable, "-m", "voice_membrane.testing.mcp_weather")
TOKEN = "mcp-test-token-0123456789"
TOOLS = ["get_weather", "explode", "slow", "chart", "whoami", "big"]


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal() as portal:
        yield portal


@pytest.fixture(scope="module")
def http_server() -> Iterator[McpHttpServer]:
    with McpHttpServer(token=TOKEN) as server:
        yield server


@pytest.fixture(scope="module", params=["stdio", "http"])
def toolbox(
    request: pytest.FixtureRequest, portal: BlockingPortal, http_server: McpHttpServer
) -> Iterator[McpToolbox]:
    if request.param == "stdio":
        server = McpServer("weather", command=WEATHER, env={"MCP_WEATHER_WHO": "tester"})
    else:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        server = McpServer("weather", url=http_server.url, headers=headers)
    with portal.wrap_async_context_manager(McpToolbox([server], timeout_s=60)) as opened:
        yield opened


def call(portal: BlockingPortal, toolbox: McpToolbox, *calls: ToolCall) -> list[ToolResultContent]:
    return portal.call(toolbox, list(calls))


def test_lists_the_servers_tools_as_definitions(toolbox: McpToolbox) -> None:
    assert [d.name for d in toolbox.definitions] == TOOLS
    weather = toolbox.definitions[0]
    assert weather.description == "Today's forecast for a city."
    assert weather.input_schema["type"] == "object"
    assert weather.input_schema["required"] == ["city"]
    assert weather.input_schema["properties"]["city"]["type"] == "string"


def test_a_round_of_calls_runs_concurrently_one_result_per_call_in_order(
    portal: BlockingPortal, toolbox: McpToolbox
) -> None:
    results = call(
        portal,
        toolbox,
        ToolCall("t1", "get_weather", {"city": "Paris"}),
        ToolCall("t2", "explode", {"reason": "the sky fell"}),
        ToolCall("t3", "get_weather", {"city": "Rome"}),
        ToolCall("t4", "no_such_tool", {}),
    )
    assert [r.tool_use_id for r in results] == ["t1", "t2", "t3", "t4"]
    assert (results[0].content, results[0].is_error) == ("Paris: sunny, high of 21 °C", False)
    assert (results[2].content, results[2].is_error) == ("Rome: sunny, high of 21 °C", False)
    # A tool that raises: the server's isError result, its message for the model.
    assert results[1].is_error and "the sky fell" in results[1].text()
    assert results[3].is_error and results[3].content == "unknown tool 'no_such_tool'"


def test_bad_arguments_are_an_error_result(portal: BlockingPortal, toolbox: McpToolbox) -> None:
    (result,) = call(portal, toolbox, ToolCall("t1", "get_weather", {"town": "Paris"}))
    assert result.is_error and "city" in result.text()


def test_content_that_is_not_text_is_described(portal: BlockingPortal, toolbox: McpToolbox) -> None:
    (result,) = call(portal, toolbox, ToolCall("t1", "chart", {}))
    assert not result.is_error
    assert result.content == "The week's chart:\n[image/png image, 69 bytes, not shown]"


def test_a_call_past_the_timeout_is_an_error_result_and_the_next_call_works(
    portal: BlockingPortal, toolbox: McpToolbox
) -> None:
    toolbox.timeout_s = 0.3
    try:
        (late,) = call(portal, toolbox, ToolCall("t1", "slow", {"seconds": 60}))
    finally:
        toolbox.timeout_s = 60
    assert late.is_error and late.content == "tool 'slow' timed out after 0.3 s"
    (next_one,) = call(portal, toolbox, ToolCall("t2", "get_weather", {"city": "Oslo"}))
    assert next_one.content == "Oslo: sunny, high of 21 °C"


def test_a_stdio_server_gets_its_env(portal: BlockingPortal, toolbox: McpToolbox) -> None:
    if toolbox.servers[0].command is None:
        pytest.skip("env is for a command")
    (result,) = call(portal, toolbox, ToolCall("t1", "whoami", {}))
    assert result.content == "tester"


def test_http_headers_are_sent_and_never_shown(
    toolbox: McpToolbox, http_server: McpHttpServer
) -> None:
    if toolbox.servers[0].url is None:
        pytest.skip("headers are for a url")
    assert http_server.authorizations
    assert set(http_server.authorizations) == {f"Bearer {TOKEN}"}
    assert TOKEN not in repr(toolbox.servers[0]) and TOKEN not in repr(toolbox)


# ------------------------------------------------------------ servers that fail


async def start_failure(*servers: McpServer, connect_timeout_s: float = 30) -> str:
    with pytest.raises(McpServerError) as excinfo:
        async with McpToolbox(servers, connect_timeout_s=connect_timeout_s):
            pass
    message = str(excinfo.value)
    assert "\n" not in message
    return message


@pytest.mark.anyio
async def test_a_command_that_does_not_exist() -> None:
    message = await start_failure(McpServer("ghost", command=("no-such-mcp-server", "--x")))
    assert message == (
        "MCP server 'ghost' (stdio) cannot run 'no-such-mcp-server': No such file or directory"
    )


@pytest.mark.anyio
async def test_a_server_that_exits_is_named_with_its_last_words() -> None:
    script = "import sys; print('config.json: no such file', file=sys.stderr); sys.exit(2)"
    message = await start_failure(McpServer("broken", command=(sys.executable, "-c", script)))
    assert message.startswith("MCP server 'broken' (stdio) did not start: ")
    assert message.endswith("(its last output: 'config.json: no such file')")


@pytest.mark.anyio
async def test_a_server_that_never_answers_times_out() -> None:
    # Reads every request and answers none; ends when its stdin closes.
    silent = McpServer("silent", command=(sys.executable, "-c", "import sys; sys.stdin.read()"))
    with anyio.fail_after(30):  # a guard against a hang, not a timing assertion
        message = await start_failure(silent, connect_timeout_s=0.5)
    assert message == "MCP server 'silent' (stdio) did not answer within 0.5 s"


@pytest.mark.anyio
async def test_a_refused_token_says_http_401_and_not_the_token(
    http_server: McpHttpServer,
) -> None:
    wrong = McpServer("weather", url=http_server.url, headers={"Authorization": "Bearer nope-123"})
    message = await start_failure(wrong)
    assert message.startswith("MCP server 'weather' (http) did not start: ")
    assert "(HTTP 401)" in message and "nope-123" not in message


@pytest.mark.anyio
async def test_a_url_with_nothing_listening() -> None:
    with McpHttpServer() as server:
        url = server.url  # a port that was free a moment ago
    message = await start_failure(McpServer("gone", url=url))
    assert message.startswith("MCP server 'gone' (http) did not start: ConnectError")


@pytest.mark.anyio
async def test_one_failing_server_fails_the_toolbox_and_closes_the_others() -> None:
    with McpHttpServer() as good:
        message = await start_failure(
            McpServer("good", url=good.url), McpServer("ghost", command=("no-such-mcp-server",))
        )
        assert "'ghost'" in message
        authorizations = len(good.authorizations)
    # The good server's session was ended (DELETE) rather than left open.
    assert authorizations >= 2


# ------------------------------------------------------------ names


@pytest.mark.anyio
async def test_clashing_names_are_an_error_naming_both_servers() -> None:
    with McpHttpServer() as one, McpHttpServer() as two:
        message = await start_failure(McpServer("a", url=one.url), McpServer("b", url=two.url))
    assert message == (
        "MCP server 'a' (http) and MCP server 'b' (http) both offer a tool named "
        "'get_weather': set a tool_prefix on one of them"
    )


@pytest.mark.anyio
async def test_a_tool_prefix_separates_them_and_calls_reach_the_right_server() -> None:
    with McpHttpServer() as one, McpHttpServer(tool_prefix="") as two:
        servers = [McpServer("a", url=one.url), McpServer("b", url=two.url, tool_prefix="b_")]
        async with McpToolbox(servers) as toolbox:
            names = [d.name for d in toolbox.definitions]
            before = len(two.authorizations)
            results = await toolbox([ToolCall("t1", "b_get_weather", {"city": "Lima"})])
            after = len(two.authorizations)
    assert names == [*TOOLS, *(f"b_{name}" for name in TOOLS)]
    assert results[0].content == "Lima: sunny, high of 21 °C"
    assert after > before  # the call went to the second server, under its own name


@pytest.mark.anyio
async def test_names_a_model_api_refuses_are_made_safe() -> None:
    with McpHttpServer(tool_prefix="wx.") as server:
        async with McpToolbox([McpServer("wx", url=server.url)]) as toolbox:
            names = [d.name for d in toolbox.definitions]
            results = await toolbox([ToolCall("t1", "wx_get_weather", {"city": "Kyiv"})])
    assert names == [f"wx_{name}" for name in TOOLS]
    assert results[0].content == "Kyiv: sunny, high of 21 °C"


# ------------------------------------------------------------ the session's lifetime


@pytest.mark.anyio
async def test_the_connect_deadline_ends_with_the_start(http_server: McpHttpServer) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    server = McpServer("weather", url=http_server.url, headers=headers)
    async with McpToolbox([server], connect_timeout_s=0.2) as toolbox:
        await anyio.sleep(0.4)  # a session outlives its servers' start-up limit
        (result,) = await toolbox([ToolCall("t1", "get_weather", {"city": "Bern"})])
    assert (result.content, result.is_error) == ("Bern: sunny, high of 21 °C", False)


@pytest.mark.anyio
async def test_a_server_lost_mid_session_gives_error_results_not_a_crash() -> None:
    server = McpHttpServer().start()
    try:
        async with McpToolbox([McpServer("weather", url=server.url)], timeout_s=10) as toolbox:
            server.stop()
            with anyio.fail_after(30):
                results = await run_tool_calls(
                    [ToolCall("t1", "get_weather", {"city": "Paris"})], toolbox, 20
                )
    finally:
        server.stop()
    assert results[0].is_error and results[0].content.startswith("tool 'get_weather' ")


# ------------------------------------------------------------ by_name


def recording_handler(tag: str, seen: list[list[str]], fail: bool = False) -> OnToolCalls:
    async def handle(calls: list[ToolCall]) -> Sequence[ToolOutput]:
        seen.append([c.id for c in calls])
        if fail:
            raise RuntimeError(f"{tag} is down")
        return [f"{tag}:{c.name}" for c in calls]

    return handle


@pytest.mark.anyio
async def test_by_name_sends_each_call_to_its_handler_and_the_rest_to_the_fallback() -> None:
    seen_a: list[list[str]] = []
    seen_b: list[list[str]] = []
    a, b = recording_handler("a", seen_a), recording_handler("b", seen_b)
    handler = by_name([({"x", "y"}, a)], fallback=b)
    calls = [ToolCall("1", "x", {}), ToolCall("2", "z", {}), ToolCall("3", "y", {})]
    results = await run_tool_calls(calls, handler, 5)
    assert [r.content for r in results] == ["a:x", "b:z", "a:y"]
    assert seen_a == [["1", "3"]] and seen_b == [["2"]]


@pytest.mark.anyio
async def test_by_name_one_failing_handler_keeps_the_others_results() -> None:
    seen: list[list[str]] = []
    good, bad = recording_handler("good", seen), recording_handler("bad", seen, fail=True)
    handler = by_name([({"x"}, good), ({"y"}, bad)])
    calls = [ToolCall("1", "x", {}), ToolCall("2", "y", {}), ToolCall("3", "nope", {})]
    results = await run_tool_calls(calls, handler, 5)
    assert (results[0].content, results[0].is_error) == ("good:x", False)
    assert results[1].is_error and "bad is down" in results[1].text()
    assert results[2].is_error and results[2].content == "unknown tool 'nope'"
