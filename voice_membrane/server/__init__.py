"""``voice-membrane serve``: sessions over a WebSocket (docs/websocket-protocol.md)."""

from .server import DEFAULT_PORT, Server

__all__ = ["DEFAULT_PORT", "Server"]
