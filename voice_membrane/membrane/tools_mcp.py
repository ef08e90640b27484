"""Tools served by MCP servers, for the tool loop.

``McpToolbox`` connects to MCP servers with the official ``mcp`` SDK — a command
run as a subprocess (stdio) or a URL (streamable HTTP) — lists their tools as
``ToolDefinition``s and runs the model's calls as an ``OnToolCalls``::

    async with McpToolbox([McpServer("weather", command=("weather-mcp",))]) as toolbox:
        request = Request(..., tools=toolbox.definitions)
        async for item in membrane.stream(request, on_tool_calls=toolbox): ...

It is a ``tools.Toolbox``: a ``Session`` given one opens it before its first turn
and closes it with the session. Every call reaches it as a ``ToolCall``, whatever
wrote it (a native tool use, an XML function call in prefill mode, an inline
JSON call), so every source of calls runs through the same code.

Each server is held open by a task of the toolbox's own task group: the servers
connect concurrently, and a server that dies mid-session ends its own task, not
the session (its tools then answer with an error result). A server that will not
start or answer within ``connect_timeout_s`` is a ``McpServerError`` naming it,
raised from ``__aenter__``. The calls of a round run concurrently, each bounded
by ``timeout_s``; a tool's ``isError`` result, a protocol error, a timeout or a
dead server is an error result the model sees, never an exception.

Tool names are kept as the server gives them (characters a model API refuses
become ``_``), after the server's ``tool_prefix``. Two servers offering the same
name are an error at start, naming both: set a ``tool_prefix`` on one.
"""

from __future__ import annotations

import json
import logging
import math
import re
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TextIO

import anyio
import httpx2
from anyio.abc import TaskStatus
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ContentBlock, EmbeddedResource, ResourceLink, TextContent
from pydantic import ValidationError

from ..infra.exception_groups import leaves
from ..infra.redact import quote, redact
from ..vendors.tls import shared_ssl_context
from ..vocab.messages import ToolDefinition, ToolResultContent
from .tools import ToolCall

_log = logging.getLogger(__name__)

_NAME_CHARACTER = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_PAGES = 100  # a tools/list that pages without end cannot hang the start


class McpServerError(Exception):
    """An MCP server that will not start, answer or list its tools; one line."""


@dataclass(frozen=True, slots=True)
class McpServer:
    """One MCP server: ``command`` (run as a subprocess, spoken to over stdio) or
    ``url`` (streamable HTTP). ``headers`` go with every HTTP request; they are
    never shown (left out of the repr). ``env`` is added to the environment the
    SDK gives a subprocess (``HOME``, ``PATH``, ``USER``… — not the whole
    environment, so no key leaks to a server by default)."""

    name: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    tool_prefix: str = ""

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give either a command or a url")
        if self.command is not None and not self.command:
            raise ValueError(f"MCP server {self.name!r}: the command is empty")

    @property
    def label(self) -> str:
        """The server named in messages: its name and transport, no header."""
        kind = "stdio" if self.command is not None else "http"
        return f"MCP server {self.name!r} ({kind})"


@dataclass(frozen=True, slots=True)
class _Route:
    """Where an offered tool name goes: a server's connection and its own name."""

    server: McpServer
    tool: str
    connection: _Connection


@dataclass(slots=True)
class _Connection:
    server: McpServer
    client: Client | None = None
    gone: str | None = None  # why the connection ended mid-session


class McpToolbox:
    """The tools of ``servers``, for one session (see the module's docstring).

    ``definitions`` is set once the toolbox is open; calling the toolbox runs
    calls (``OnToolCalls``)."""

    def __init__(
        self,
        servers: Sequence[McpServer],
        *,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 30.0,
    ) -> None:
        self.servers = list(servers)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.definitions: list[ToolDefinition] = []
        self._routes: dict[str, _Route] = {}
        self._stack = AsyncExitStack()

    def __repr__(self) -> str:
        return f"McpToolbox({[server.label for server in self.servers]})"

    async def __aenter__(self) -> McpToolbox:
        stack = AsyncExitStack()
        try:
            closing = anyio.Event()
            group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(closing.set)  # runs first on exit: the holders close their clients
            listings: dict[int, tuple[_Connection, list[Any]]] = {}
            failures: list[McpServerError] = []

            async def start(n: int, server: McpServer) -> None:
                try:
                    listings[n] = await group.start(self._hold, server, closing)
                except McpServerError as exc:
                    failures.append(exc)

            async with anyio.create_task_group() as starting:  # all servers at once
                for n, server in enumerate(self.servers):
                    starting.start_soon(start, n, server)
            problem = failures[0] if failures else None
            if problem is None:
                try:
                    self._offer([listings[n] for n in range(len(self.servers))])
                except McpServerError as exc:
                    problem = exc
        except BaseException:
            await stack.aclose()
            raise
        if problem is not None:  # raised outside the task group: not wrapped in a group
            await stack.aclose()
            raise problem
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    # ------------------------------------------------------------ servers

    async def _hold(
        self,
        server: McpServer,
        closing: anyio.Event,
        *,
        task_status: TaskStatus[tuple[_Connection, list[Any]]],
    ) -> None:
        """Connect, list the tools, report them, and keep the connection open until
        the toolbox closes. Everything entered here is left here (anyio scopes
        belong to the task that entered them)."""
        connection = _Connection(server)
        started = False
        http_status: list[int] = []  # error statuses the server answered with (HTTP)
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
            deadline = anyio.current_time() + self.connect_timeout_s
            scope = anyio.CancelScope(deadline=deadline)
            try:
                with scope:
                    async with AsyncExitStack() as stack:
                        client = await stack.enter_async_context(
                            _client(server, errlog, http_status)
                        )
                        tools = await _list_tools(client)
                        scope.deadline = math.inf
                        connection.client = client
                        task_status.started((connection, tools))
                        started = True
                        await closing.wait()
            except Exception as exc:
                if not started:
                    failure = _start_failure(server, exc, errlog, http_status)
                    raise McpServerError(failure) from None
                connection.gone = _describe(exc)
                _log.warning("%s stopped: %s", server.label, connection.gone)
            finally:
                connection.client = None
            if not started:  # the deadline passed: the only way out with no exception
                raise McpServerError(
                    f"{server.label} did not answer within {self.connect_timeout_s:g} s"
                    + _last_line(errlog)
                )

    def _offer(self, listings: list[tuple[_Connection, list[Any]]]) -> None:
        """The listed tools as definitions, under the names the model will use."""
        for connection, tools in listings:
            server = connection.server
            for tool in tools:
                name = _offered_name(server.tool_prefix + tool.name)
                other = self._routes.get(name)
                if other is not None and other.server is server:
                    raise McpServerError(f"{server.label} offers two tools named {name!r}")
                if other is not None:
                    raise McpServerError(
                        f"{other.server.label} and {server.label} both offer a tool named "
                        f"{name!r}: set a tool_prefix on one of them"
                    )
                schema = tool.input_schema
                if not isinstance(schema, dict) or schema.get("type") != "object":
                    raise McpServerError(
                        f"{server.label}: tool {tool.name!r} has an input schema that is not "
                        'a JSON schema with "type": "object"'
                    )
                self._routes[name] = _Route(server, tool.name, connection)
                self.definitions.append(
                    ToolDefinition(
                        name=name,
                        description=tool.description or tool.title or "",
                        input_schema=schema,
                    )
                )

    # ------------------------------------------------------------ calls

    async def __call__(self, calls: list[ToolCall]) -> list[ToolResultContent]:
        """One result per call, in order; the calls run concurrently."""
        results = [ToolResultContent(tool_use_id=call.id, is_error=True) for call in calls]

        async def fill(n: int, call: ToolCall) -> None:
            results[n] = await self._call(call)

        async with anyio.create_task_group() as group:
            for n, call in enumerate(calls):
                group.start_soon(fill, n, call)
        return results

    async def _call(self, call: ToolCall) -> ToolResultContent:
        def error(message: str) -> ToolResultContent:
            return ToolResultContent(tool_use_id=call.id, content=message, is_error=True)

        route = self._routes.get(call.name)
        if route is None:
            return error(f"unknown tool {call.name!r}")
        client = route.connection.client
        if client is None:
            why = route.connection.gone or "the connection closed"
            return error(f"tool {call.name!r} is unavailable: its MCP server stopped ({why})")
        try:
            with anyio.fail_after(self.timeout_s):
                result = await client.call_tool(route.tool, call.input)
        except TimeoutError:
            return error(f"tool {call.name!r} timed out after {self.timeout_s:g} s")
        except Exception as exc:  # the model sees the failure; the reply goes on
            return error(f"tool {call.name!r} failed: {_describe(exc)}")
        return ToolResultContent(
            tool_use_id=call.id, content=result_text(result), is_error=result.is_error
        )


def result_text(result: CallToolResult) -> str:
    """A tool's result as the text the model reads: text content joined; other
    content described in a few words; structured content as JSON when there is
    no content."""
    parts = [_content_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "\n".join(parts)


def _content_text(block: ContentBlock) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.uri}]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return text
        mime = resource.mime_type or "binary"
        return f"[{mime} resource {resource.uri}, not shown]"
    size = len(block.data) * 3 // 4  # base64
    return f"[{block.mime_type} {block.type}, {size:,} bytes, not shown]"


# ------------------------------------------------------------ helpers


def _client(server: McpServer, errlog: TextIO, http_status: list[int]) -> Client:
    if server.command is not None:
        params = StdioServerParameters(
            command=server.command[0],
            args=list(server.command[1:]),
            env=dict(server.env) or None,
            cwd=server.cwd,
        )
        return Client(stdio_client(params, errlog=errlog), cache=None)
    assert server.url is not None

    async def note_status(response: httpx2.Response) -> None:
        # The SDK turns an HTTP error into "Server returned an error response";
        # the status (401: a missing or wrong token) says what to fix.
        if response.status_code >= 400:
            http_status.append(response.status_code)

    http = httpx2.AsyncClient(
        event_hooks={"response": [note_status]},
        headers=dict(server.headers),
        timeout=httpx2.Timeout(30.0, read=300.0),  # the SDK's own defaults
        verify=shared_ssl_context(),
    )
    return Client(_HttpTransport(server.url, http), cache=None)


class _HttpTransport:
    """The SDK's streamable HTTP transport over our own HTTP client, closed with it."""

    def __init__(self, url: str, http: httpx2.AsyncClient) -> None:
        self._url, self._http = url, http
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Any:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self._http)
            streams = await stack.enter_async_context(
                streamable_http_client(self._url, http_client=self._http)
            )
            self._stack = stack.pop_all()
        return streams

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()


async def _list_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _offered_name(name: str) -> str:
    """The name as a model API accepts it: letters, digits, ``_`` and ``-``, 64 at most."""
    return _NAME_CHARACTER.sub("_", name)[:64] or "_"


def _describe(exc: BaseException) -> str:
    """One line for an exception, out of any exception group, redacted."""
    inner = leaves(exc)[0]
    if isinstance(inner, MCPError):
        text = inner.message
    elif isinstance(inner, ValidationError):
        text = f"the server's answer is not valid MCP ({inner.error_count()} problem(s))"
    elif isinstance(inner, httpx2.HTTPStatusError):
        text = f"HTTP {inner.response.status_code}"
    else:
        text = str(inner) or type(inner).__name__
        if isinstance(inner, OSError | httpx2.HTTPError):
            text = f"{type(inner).__name__}: {text}"
    return redact(" ".join(text.split()))[:300]


def _start_failure(
    server: McpServer, exc: BaseException, errlog: TextIO, http_status: list[int]
) -> str:
    inner = leaves(exc)[0]
    if isinstance(inner, McpServerError):
        return str(inner)
    if server.command is not None and isinstance(inner, OSError):
        where = f" in {server.cwd}" if server.cwd else ""
        reason = inner.strerror or inner
        return f"{server.label} cannot run {quote(server.command[0])}{where}: {reason}"
    status = f" (HTTP {http_status[-1]})" if http_status else ""
    return f"{server.label} did not start: {_describe(exc)}{status}{_last_line(errlog)}"


def _last_line(errlog: TextIO) -> str:
    """The last line the server wrote to its stderr, to say why it failed."""
    try:
        errlog.seek(0)
        lines = [line.strip() for line in errlog.read()[-4000:].splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return f" (its last output: {quote(lines[-1])})" if lines else ""


__all__ = ["McpServer", "McpServerError", "McpToolbox", "result_text"]
