"""A small MCP server for offline tests, over stdio or streamable HTTP on loopback.

Its tools: ``get_weather(city)`` (a made-up forecast), ``explode(reason)``
(raises ``ToolError(reason)``: the SDK answers with an ``isError`` result),
``slow(seconds)`` (sleeps, for timeouts), ``chart()`` (text and an image) and
``whoami()`` (the value of ``MCP_WEATHER_WHO`` in its environment: a server's
``env``) and ``big(chars, json_lines)`` (a result that large, as text or as JSON).

Over stdio, as a subprocess::

    python -m voice_membrane.testing.mcp_weather [--tool-prefix P] [--started-file F]

Over HTTP, in a thread of the test process::

    with McpHttpServer(token="secret") as server:
        server.url                  # http://127.0.0.1:PORT/mcp
        server.authorizations       # the Authorization headers it was sent

``token`` makes it refuse (401) any request without ``Authorization: Bearer
<token>``. ``--tool-prefix`` / ``tool_prefix`` prepends a string to every tool's
name (two servers whose names do not clash).
"""

from __future__ import annotations

import argparse
import base64
import os
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

from .loopback import LoopbackApp

# The smallest valid PNG (one transparent pixel), for a tool result that is not text.
_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


def weather_server(tool_prefix: str = "") -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("weather", log_level="WARNING")

    @server.tool(name=f"{tool_prefix}get_weather", description="Today's forecast for a city.")
    def get_weather(city: str) -> str:
        return f"{city}: sunny, high of 21 °C"

    @server.tool(name=f"{tool_prefix}explode", description="Always fails.")
    def explode(reason: str) -> str:
        raise ToolError(reason)  # the SDK's way to say why; its message reaches the client

    @server.tool(name=f"{tool_prefix}slow", description="Answers after a while.")
    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"done after {seconds:g} s"

    @server.tool(
        name=f"{tool_prefix}chart", description="A chart of the week.", structured_output=False
    )
    def chart() -> list[Any]:
        return ["The week's chart:", Image(data=_PNG, format="png")]

    @server.tool(name=f"{tool_prefix}whoami", description="Who runs this server.")
    def whoami() -> str:
        return os.environ.get("MCP_WEATHER_WHO", "nobody")

    @server.tool(name=f"{tool_prefix}big", description="A result of `chars` characters.")
    def big(chars: int, json_lines: bool = False) -> Any:
        if json_lines:  # structured content: the SDK sends it as JSON text
            return {"rows": ["r" * 98] * (chars // 100)}
        return "x" * chars

    return server


class McpHttpServer(LoopbackApp):
    """``weather_server`` over streamable HTTP with uvicorn on 127.0.0.1 (a free
    port), in a thread of its own."""

    def __init__(self, *, token: str | None = None, tool_prefix: str = "") -> None:
        self.token = token
        self.authorizations: list[str | None] = []
        app = weather_server(tool_prefix).streamable_http_app(host="127.0.0.1")
        self._app = app
        super().__init__("mcp-weather", lifespan="on")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def _guarded(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            raw = headers.get(b"authorization")
            authorization = raw.decode("latin-1") if raw is not None else None
            self.authorizations.append(authorization)
            if self.token is not None and authorization != f"Bearer {self.token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self._app(scope, receive, send)

    def app(self) -> Any:
        return self._guarded  # (lifespan on: the app's session manager runs in it)


def main() -> None:
    parser = argparse.ArgumentParser(description="The MCP test server, over stdio.")
    parser.add_argument("--tool-prefix", default="")
    # A line is appended to this file as the process starts: tests count the
    # servers a session started.
    parser.add_argument("--started-file", default=None)
    args = parser.parse_args()
    if args.started_file:
        with open(args.started_file, "a", encoding="utf-8") as started:
            started.write(f"{os.getpid()}\n")
    weather_server(args.tool_prefix).run("stdio")


if __name__ == "__main__":
    main()
