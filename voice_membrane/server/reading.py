"""A client that stops reading, found in about the same time at any sample rate.

Two parts. The kernel's send buffer of a session's socket holds the lead's worth
of its audio (``set_send_buffer``), not the MBs Linux autotunes it to, so a
stalled client pins little memory there. And, since the client's own receive
buffer is out of the server's hands (it grows to hundreds of KB: tens of
seconds at 8 kHz), ``watch_reading`` sends a ping behind the audio while a turn
runs: a client that reads answers it within the lead and its round trip; one
that has not answered once the bound's worth of audio has been sent after the
ping has at least that much waiting for it, and is dropped.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable

import anyio
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from .protocol import AudioFormat, audio_bytes_per_second
from .socket_sink import SocketSink

PROBE_EVERY_S = 0.5


def set_send_buffer(ws: ServerConnection, audio: AudioFormat, seconds: float) -> None:
    """``seconds`` of this session's audio (the kernel doubles it for its
    bookkeeping). Set once the format is known, before the first audio."""
    sock = ws.transport.get_extra_info("socket")
    if sock is None:
        return
    per_s = audio_bytes_per_second(audio.encoding, audio.sample_rate, audio.frame_ms)
    size = max(1, round(seconds * per_s))
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)


async def watch_reading(
    ws: ServerConnection,
    sink: SocketSink,
    *,
    bound_s: float,
    turn_running: Callable[[], bool],
) -> None:
    """While a turn runs, a ping every ``PROBE_EVERY_S``: until the client
    answers it, the sink counts the frames sent after it, and drops the client
    once ``bound_s`` of audio (beyond the lead) waits for it (``SocketSink.
    expect_read``). Counted in frames sent, not seconds: a server slowed by
    load sends fewer of them and drops no one for it. One wake-up per probe:
    the frames are counted where they are sent, not polled."""
    limit = round((bound_s + sink.lead_s) * 1000 / sink.frame_ms)
    while True:
        await anyio.sleep(PROBE_EVERY_S)
        if not turn_running():
            continue
        sink.expect_read(limit)
        try:
            pong = await ws.ping()  # (waits while the socket takes nothing: a stalled client)
            await pong
        except ConnectionClosed:
            return  # the session is ending: nothing to watch
        sink.read_confirmed()
