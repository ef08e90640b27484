"""What both fake speech-to-text services share: the script queue, the record of
each connection, and one accepted socket's sending with its scripted faults."""

from __future__ import annotations

import contextlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from starlette.responses import Response
from starlette.websockets import WebSocket

from .fake_server import FakeServer
from .loopback import tcp_transport
from .transcript_script import TranscriptScript


class SocketFinished(Exception):
    """The socket is finished (closed by the fake, the client, or a scripted drop)."""


@dataclass(slots=True)
class SttConnection:
    """One WebSocket connection as a fake STT service saw it."""

    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    controls: list[Any] = field(default_factory=list)  # parsed JSON messages received
    samples: int = 0  # audio samples received
    sent: list[Any] = field(default_factory=list)  # messages sent (parsed JSON)
    close_code: int | None = None
    client_closed: bool = False
    dropped: bool = False


class SttServer(FakeServer):
    """The script queue (``TranscriptScript``; an empty script when it runs out)
    and the connections recorded, for assertions."""

    def __init__(self, *scripts: TranscriptScript, api_key: str = "test-key") -> None:
        super().__init__()
        self.api_key = api_key
        self._scripts: deque[TranscriptScript] = deque(scripts)
        self.connections: list[SttConnection] = []

    def add(self, *scripts: TranscriptScript) -> None:  # type: ignore[override]
        with self._lock:
            self._scripts.extend(scripts)

    def next_script(self) -> TranscriptScript:
        with self._lock:
            return self._scripts.popleft() if self._scripts else TranscriptScript()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._scripts)

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self._scripts.clear()
            self.connections.clear()

    def record_socket(self, websocket: WebSocket) -> SttConnection:
        conn = SttConnection(
            websocket.url.path,
            dict(websocket.query_params),
            {k.lower(): v for k, v in websocket.headers.items()},
        )
        with self._lock:
            self.connections.append(conn)
        return conn

    async def serve(self, websocket: WebSocket, session: SessionFactory) -> None:
        """One connection: recorded, refused as the key or the script says (an HTTP
        answer to the upgrade), else accepted and played by ``session``."""
        conn = self.record_socket(websocket)
        script = self.next_script()
        refusal = self.refusal(conn, script)
        if refusal is not None:
            await self.deny(websocket, refusal)
            return
        await websocket.accept()
        with contextlib.suppress(SocketFinished):
            await session(websocket, conn, script).run()

    def refusal(self, conn: SttConnection, script: TranscriptScript) -> Response | None:
        """The HTTP answer that refuses this upgrade, or None to accept it."""
        raise NotImplementedError

    async def deny(self, websocket: WebSocket, response: Response) -> None:
        """Refuse the upgrade with an HTTP response (what a 401 / 429 looks like)."""
        await websocket.send_denial_response(response)


class Session(Protocol):
    async def run(self) -> None: ...


SessionFactory = Callable[[WebSocket, SttConnection, TranscriptScript], Session]
"""What plays one accepted connection (a fake's own protocol)."""


class ScriptedSocket:
    """Sends on one accepted socket, applying the script's fault before the
    message it names; records what went out."""

    def __init__(self, ws: WebSocket, conn: SttConnection, script: TranscriptScript) -> None:
        self.ws, self.conn, self.script = ws, conn, script
        self.finished = False
        self.lock = anyio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        async with self.lock:
            await self._fault_due()
            await self._send_text(json.dumps(message))
            self.conn.sent.append(message)

    async def _fault_due(self) -> None:
        fault = self.script.fault_at(len(self.conn.sent))
        if fault is None:
            return
        if fault.kind == "drop":
            await self.drop()
        elif fault.kind == "stall":
            await anyio.sleep_forever()
        elif fault.kind == "malformed":
            await self._send_text('{"type": "Results", "channel": {"alternatives": [nu')
            self.conn.sent.append("malformed")

    async def _send_text(self, text: str) -> None:
        if self.finished:
            raise SocketFinished
        try:
            await self.ws.send_text(text)
        except Exception as exc:  # the client went away mid-send
            self.conn.client_closed = True
            raise SocketFinished from exc

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if not self.finished:
            self.finished = True
            self.conn.close_code = code
            await self.ws.close(code, reason.encode()[:123].decode(errors="ignore"))
        raise SocketFinished

    async def drop(self) -> None:
        """Cut the TCP connection: no close frame, as when a network path dies."""
        self.finished = True
        self.conn.dropped = True
        # "after N messages" means the client got them: abort() discards unsent bytes.
        await anyio.sleep(0.05)
        transport = tcp_transport(self.ws._send)
        if transport is not None:
            transport.abort()
        else:
            await self.ws.close(1011)
        raise SocketFinished
