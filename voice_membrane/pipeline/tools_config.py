"""The ``[tools]`` section of a pipeline file: tool calls' limits and the MCP
servers whose tools the model is offered (docs/tools.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..membrane.tool_limits import DEFAULT_MAX_REPLY_RESULT_CHARS, DEFAULT_MAX_RESULT_CHARS
from ..vendors.credentials import BaseUrl


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class McpServerConfig(_Section):
    """One ``[[tools.mcp]]`` table: an MCP server run as ``command`` (stdio) or
    reached at ``url`` (streamable HTTP). See docs/tools.md."""

    name: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    command: list[str] | None = Field(None, min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: BaseUrl | None = None
    # Header name → the environment variable holding its value (never in the file).
    headers_env: dict[str, Annotated[str, Field(pattern=_ENV_NAME)]] = Field(default_factory=dict)
    bearer_token_env: str | None = Field(None, pattern=_ENV_NAME)
    tool_prefix: str = Field("", pattern=r"^[A-Za-z0-9_-]{0,32}$")

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                'give either command = ["program", "arg", …] (run over stdio) or '
                'url = "http://…" (streamable HTTP)'
            )
        if self.command is not None and (self.headers_env or self.bearer_token_env):
            raise ValueError("headers_env and bearer_token_env are for a url, not a command")
        if self.url is not None and (self.env or self.cwd is not None):
            raise ValueError("env and cwd are for a command, not a url")
        if self.command is not None and not self.command[0]:
            raise ValueError("the command's program is empty")
        return self

    def label(self, n: int) -> str:
        """Its name: ``name``, else the program's or host's name, else its place."""
        if self.name:
            return self.name
        if self.command:
            return Path(self.command[0]).name or f"mcp{n + 1}"
        return urlsplit(self.url or "").hostname or f"mcp{n + 1}"


class ToolsConfig(_Section):
    # Each tool call's time limit; a call past it gets an error result.
    timeout_s: float = Field(30.0, gt=0, le=3600, allow_inf_nan=False)
    # How long each MCP server has to start and list its tools.
    connect_timeout_s: float = Field(30.0, gt=0, le=600, allow_inf_nan=False)
    # A result past this many characters is cut, with a marker the model reads; so
    # are all of one reply's results together past the second (docs/tools.md).
    max_result_chars: int = Field(DEFAULT_MAX_RESULT_CHARS, ge=100, le=10_000_000)
    max_reply_result_chars: int = Field(DEFAULT_MAX_REPLY_RESULT_CHARS, ge=100, le=100_000_000)
    mcp: list[McpServerConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _distinct_names(self) -> ToolsConfig:
        labels = [server.label(n) for n, server in enumerate(self.mcp)]
        for label in labels:
            if labels.count(label) > 1:
                raise ValueError(f"two MCP servers are named {label!r}: give each a distinct name")
        return self


__all__ = ["McpServerConfig", "ToolsConfig"]
