"""The sans-I/O parts of the WebRTC transport: reading a POST, parsing an
offer, the answer's sample queue and sink, the client's audio downmixed, and
the gap measure of the loss test; the channel's socket against a client that
reads nothing."""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest

pytest.importorskip("aiortc")

from aiortc.mediastreams import MediaStreamError
from av import AudioFrame
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request

from voice_membrane.server.http_post import Posted, PostIntake, reply_bytes
from voice_membrane.server.outbox import Outbox
from voice_membrane.server.webrtc_media import (
    OutboundTrack,
    SampleQueue,
    TrackSink,
    downmix,
    gap_samples,
    pump_track,
)
from voice_membrane.server.webrtc_offer import parse_offer
from voice_membrane.server.webrtc_peer import SEND_HIGH_WATER, ChannelSocket, OfferRefused
from voice_membrane.testing.webrtc_client import Received
from voice_membrane.vocab.audio import AudioChunk

pytestmark = pytest.mark.anyio
HEAD = b"POST /v1/webrtc/offer HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n"


def test_a_post_is_read_whole_from_any_pieces() -> None:
    intake = PostIntake(100)
    data = HEAD + b"v=0\r\n"
    outcomes = [intake.feed(data[i : i + 3]) for i in range(0, len(data), 3)]
    assert all(o is None for o in outcomes[:-1])
    posted = outcomes[-1]
    assert isinstance(posted, Posted) and posted.body == b"v=0\r\n"
    assert posted.request.method == "POST" and posted.request.headers["Host"] == "h"


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 500\r\n\r\n", 413),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        (b"POST / HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nX: " + b"a" * 20_000, 431),
    ],
)
def test_a_bad_post_is_refused_in_one_line(data: bytes, status: int) -> None:
    outcome = PostIntake(100).feed(data)
    assert outcome is not None and not isinstance(outcome, Posted)
    assert outcome.status_code == status and outcome.body.count(b"\n") == 1
    wire = reply_bytes(outcome)
    assert wire.startswith(f"HTTP/1.1 {status} ".encode()) and b"Connection: close" in wire


def test_offers_come_as_sdp_or_pipecats_json() -> None:
    assert parse_offer("application/sdp", b"v=0\r\n") == ("v=0\r\n", False)
    body = b'{"sdp": "v=0\\r\\n", "type": "offer"}'
    assert parse_offer("application/json; charset=utf-8", body) == ("v=0\r\n", True)
    for kind, bad in [
        ("application/json", b'{"sdp": "v=0", "type": "answer"}'),
        ("application/json", b"[1]"),
        ("application/sdp", b"hello"),
        ("application/sdp", b"\xff"),
        ("text/plain", b"v=0"),
    ]:
        with pytest.raises(OfferRefused):
            parse_offer(kind, bad)


def test_the_queue_gives_what_it_holds_then_silence() -> None:
    queue = SampleQueue()
    queue.push(np.arange(1, 6, dtype=np.int16))
    queue.push(np.arange(6, 9, dtype=np.int16))
    assert list(queue.take(4)) == [1, 2, 3, 4]
    assert list(queue.take(6)) == [5, 6, 7, 8, 0, 0]
    assert (queue.taken, queue.sounded, queue.held) == (10, 8, 0)


def test_stereo_is_downmixed() -> None:
    stereo = np.array([100, 300, -100, -300], dtype=np.int16)
    assert list(downmix(stereo, 2)) == [200, -200]
    assert list(downmix(stereo, 1)) == list(stereo)


async def test_the_sink_feeds_the_track_and_an_interrupt_empties_it() -> None:
    track = OutboundTrack()
    sink = TrackSink(Outbox(100, 10, 10_000), track)
    await sink.open()
    await sink.write(AudioChunk(np.full(4800, 1000, dtype=np.int16), 48000))  # 100 ms
    assert track.queue.held == 4800  # within the lead: all of it at once
    frame = await track.recv()
    assert frame.samples == 960 and frame.sample_rate == 48000
    await sink.stop()
    assert track.queue.held == 0
    track.stop()


def test_the_gap_is_measured_on_the_audio_timeline() -> None:
    got = Received()
    frame = np.zeros(960, dtype=np.int16)
    for pts in (0, 960, 1920, 1920 + 960 * 6, 1920 + 960 * 7):  # five frames lost
        got.frames.append((pts, frame))
    assert got.longest_gap_s() == pytest.approx(5 * 0.02)
    assert got.longest_gap_s(since=3) == 0.0


def test_packets_lost_before_a_frame_become_silence_up_to_a_second() -> None:
    assert gap_samples(None, 960) == 0
    assert gap_samples(960, 960) == 0
    assert gap_samples(960, 960 * 4) == 960 * 3
    assert gap_samples(0, 48000 * 5) == 48000


async def test_a_long_loss_reaches_the_listener_as_frames_of_silence() -> None:
    class Track:
        def __init__(self) -> None:
            self.frames = [_frame(0), _frame(960 * 30)]  # 580 ms lost between them

        async def recv(self) -> Any:
            if not self.frames:
                raise MediaStreamError
            return self.frames.pop(0)

    heard: list[bytes] = []
    await pump_track(Track(), heard.append)
    assert sum(len(b) for b in heard) // 2 == 960 * 31  # the timeline keeps its length
    assert max(len(b) for b in heard) == 2 * 960  # no frame over 20 ms (the limit is 200)


def _frame(pts: int) -> Any:
    frame = AudioFrame.from_ndarray(np.zeros((1, 960), dtype=np.int16), format="s16", layout="mono")
    frame.sample_rate, frame.pts = 48000, pts
    return frame


class _Channel:
    """aiortc's data channel as ChannelSocket uses it, holding what is sent
    unsent: a client that reads nothing (aiortc's own peer always reads)."""

    readyState = "open"

    def __init__(self) -> None:
        self.bufferedAmount = 0
        self.bufferedAmountLowThreshold = 0
        self.sent: list[str | bytes] = []

    def on(self, event: str, handler: Any) -> None:
        pass

    def send(self, data: str | bytes) -> None:
        self.sent.append(data)
        self.bufferedAmount += len(data)

    def close(self) -> None:
        self.readyState = "closed"


async def test_a_send_waits_on_a_full_channel_until_the_client_is_cut() -> None:
    socket = ChannelSocket(Request("/v1/webrtc/offer", Headers()))
    channel = _Channel()
    socket.attach(channel)
    await socket.send("x" * (SEND_HIGH_WATER + 1))
    with anyio.move_on_after(0.2) as waiting:
        await socket.send("more")  # the channel holds too much: this waits
    assert waiting.cancelled_caught and len(channel.sent) == 1
    with anyio.fail_after(5):  # (against a hang)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cut_soon, socket)
            with pytest.raises(ConnectionClosed):
                await socket.send("more")  # (what _enforce_drop's abort ends)
    with pytest.raises(ConnectionClosed):
        await socket.recv()
    assert socket.close_code == 1006


async def _cut_soon(socket: ChannelSocket) -> None:
    await anyio.sleep(0.05)
    socket.transport.abort()
