"""A lossy UDP relay on loopback between a WebRTC client and the server, for the
loss test and the benchmark: the client is given the relay's address instead of
the server's host candidate (``rewrite_answer``), and the relay forwards each
packet, dropping RTP media packets at ``loss`` (seeded: the same packets every
run). ICE, DTLS and SCTP packets always pass: their loss is retried and only
delays the start, while lost audio is what the jitter buffer and Opus
concealment are for."""

from __future__ import annotations

import random
import re
from types import TracebackType

import anyio
from anyio.abc import TaskGroup, UDPSocket

Address = tuple[str, int]
_CANDIDATE = re.compile(r"^(a=candidate:\S+ 1 udp \d+ )(\S+) (\d+)( typ host.*)$", re.MULTILINE)


def is_rtp(packet: bytes) -> bool:
    """RTP (not RTCP, STUN, DTLS): version 2, payload type outside RTCP's 200-204
    (RFC 7983 and RFC 5761's demultiplexing)."""
    return len(packet) >= 12 and 128 <= packet[0] <= 191 and not 200 <= packet[1] <= 204


class LossyRelay:
    def __init__(self, loss: float, seed: int = 7) -> None:
        self.loss = loss
        self._rng = random.Random(seed)
        self.server: Address | None = None
        self.client: Address | None = None
        self.passed = self.dropped = 0
        self._socket: UDPSocket | None = None
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> LossyRelay:
        self._socket = await anyio.create_udp_socket(local_host="127.0.0.1")
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._forward)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._tg is not None and self._socket is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        await self._socket.aclose()

    @property
    def port(self) -> int:
        assert self._socket is not None
        return int(self._socket.extra(anyio.abc.SocketAttribute.local_port))

    def rewrite_answer(self, sdp: str) -> str:
        """The answer with its (one, loopback) host candidate pointing at the relay."""
        found = _CANDIDATE.search(sdp)
        if found is None:
            raise ValueError("the answer has no host candidate")
        self.server = (found.group(2), int(found.group(3)))
        return _CANDIDATE.sub(rf"\g<1>127.0.0.1 {self.port}\g<4>", sdp)

    def drops(self, packet: bytes) -> bool:
        return is_rtp(packet) and self._rng.random() < self.loss

    async def _forward(self) -> None:
        assert self._socket is not None
        async for packet, source in self._socket:
            if source == self.server:
                target = self.client
            else:
                self.client, target = source, self.server
            if target is None:
                continue
            if self.drops(packet):
                self.dropped += 1
                continue
            self.passed += 1
            await self._socket.sendto(packet, *target)
