"""A Python WebRTC client of ``voice-membrane serve`` (aiortc), for tests,
benchmarks and examples/webrtc_client.py.

It POSTs its offer to ``/v1/webrtc/offer`` (WHIP style: ``application/sdp``),
opens the ``session`` data channel, sends what its microphone is given
(``speak``: any rate, sent as 20 ms frames in real time, silence between) and
records the answer's audio as it arrives: each frame with its RTP timestamp,
so a gap in what was received can be measured on the audio's own timeline.

::

    async with WebRtcClient(server.url) as client:
        started = await client.start(pipeline="voice", input_audio={})
        client.speak(samples, 16000)
        end = await client.wait_for(lambda e: e["type"] == "turn.end")
"""

from __future__ import annotations

import fractions
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import httpx
import numpy as np
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from av import AudioFrame

from ..server.webrtc_media import tune_jitter_buffer
from ..vocab.audio import Samples, resample

RATE = 48000
FRAME = RATE // 50
Event = dict[str, Any]


class Refused(RuntimeError):
    """The server answered the offer with an error status (its one line)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{status}: {text.strip()}")
        self.status = status


class MicTrack(MediaStreamTrack):
    """The client's microphone: what ``play`` is given, then silence, at real time."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._pending: Samples = np.zeros(0, dtype=np.int16)
        self._start: float | None = None
        self._pts = 0

    def play(self, samples: Samples, rate: int) -> float:
        """Queue ``samples``; the seconds until they have all been sent."""
        if rate != RATE:
            samples = resample(samples, rate, RATE)
        self._pending = np.concatenate([self._pending, samples.astype(np.int16)])
        return len(self._pending) / RATE

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        now = time.monotonic()
        if self._start is None:
            self._start = now
        else:
            self._pts += FRAME
            if (wait := self._start + self._pts / RATE - now) > 0:
                await anyio.sleep(wait)
        out = np.zeros(FRAME, dtype=np.int16)
        part = self._pending[:FRAME]
        out[: len(part)] = part
        self._pending = self._pending[len(part) :]
        frame = AudioFrame.from_ndarray(out.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate, frame.pts = RATE, self._pts
        frame.time_base = fractions.Fraction(1, RATE)
        return frame


@dataclass
class Received:
    """The answer's audio as it arrived: (RTP timestamp in samples, mono samples)."""

    frames: list[tuple[int, Samples]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # each frame's, time.monotonic()

    def audio(self) -> Samples:
        if not self.frames:
            return np.zeros(0, dtype=np.int16)
        return np.concatenate([s for _, s in self.frames])

    def longest_gap_s(self, since: int = 0) -> float:
        """The longest stretch of the timeline with no audio received (lost and
        not concealed), from frame ``since`` on."""
        frames = self.frames[since:]
        gaps = [(b - a - len(sa)) / RATE for (a, sa), (b, _) in itertools.pairwise(frames)]
        return max([0.0, *gaps])


class WebRtcClient:
    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        json_offer: bool = False,
        rewrite_answer: Callable[[str], str] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token, self.json_offer = token, json_offer
        self.rewrite_answer = rewrite_answer  # (a lossy relay's address for the server's)
        self.pc = RTCPeerConnection()
        self.mic = MicTrack()
        self.pc.addTrack(self.mic)
        for receiver in self.pc.getReceivers():
            tune_jitter_buffer(receiver)  # as the server's (a lost packet: 20-80 ms, not 100)
        self.channel = self.pc.createDataChannel("session")
        self.events: list[Event] = []
        self.received = Received()
        self.closed: Event | None = None  # the server's session.closed
        self._new = anyio.Event()
        self._opened = anyio.Event()
        self.channel.on("open", self._opened.set)
        self.channel.on("message", self._message)
        self.channel.on("close", self._wake)
        self.pc.on("track", self._track)
        self._tg: Any = None

    async def __aenter__(self) -> WebRtcClient:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self.connect()
        except BaseException:
            await self.pc.close()
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.pc.close()
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(et, e, tb)

    async def connect(self, timeout_s: float = 20.0) -> None:
        """The offer POSTed, the answer set, the data channel open."""
        await self.pc.setLocalDescription(await self.pc.createOffer())
        answer = await self.post_offer(self.pc.localDescription.sdp)
        if self.rewrite_answer is not None:
            answer = self.rewrite_answer(answer)
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        with anyio.fail_after(timeout_s):
            await self._opened.wait()

    async def post_offer(self, sdp: str) -> str:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if self.json_offer:
            body = json.dumps({"sdp": sdp, "type": "offer"}).encode()
            headers["Content-Type"] = "application/json"
        else:
            body, headers["Content-Type"] = sdp.encode(), "application/sdp"
        async with httpx.AsyncClient(timeout=20) as http:
            reply = await http.post(self.url + "/v1/webrtc/offer", content=body, headers=headers)
        if reply.status_code not in (200, 201):
            raise Refused(reply.status_code, reply.text)
        return str(reply.json()["sdp"]) if self.json_offer else reply.text

    def _message(self, data: str | bytes) -> None:
        event = json.loads(data)
        if event.get("type") == "session.closed":
            self.closed = event
        self.events.append(event)
        self._wake()

    def _wake(self) -> None:
        self._new.set()
        self._new = anyio.Event()

    def _track(self, track: Any) -> None:
        self._tg.start_soon(self._record, track)

    async def _record(self, track: Any) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            samples = np.asarray(frame.to_ndarray(), dtype=np.int16).reshape(-1)
            channels = len(frame.layout.channels)
            if channels > 1:
                samples = samples.reshape(-1, channels)[:, 0].copy()
            self.received.frames.append((int(frame.pts), samples))
            self.received.arrivals.append(time.monotonic())

    def send(self, **message: Any) -> None:
        self.channel.send(json.dumps(message))

    def speak(self, samples: Samples, rate: int) -> float:
        """The microphone says ``samples``; the seconds until it has."""
        return self.mic.play(samples, rate)

    async def start(self, **fields: Any) -> Event:
        self.send(type="session.start", **fields)
        return await self.wait_for(lambda e: e["type"] in ("session.started", "error"))

    async def wait_for(self, match: Callable[[Event], bool], timeout_s: float = 60.0) -> Event:
        """The first event (from all received so far) that ``match``es."""
        with anyio.fail_after(timeout_s):
            while True:
                for event in self.events:
                    if match(event):
                        return event
                if self.channel.readyState == "closed":
                    raise ConnectionError(f"the channel closed: {self.closed}")
                await self._new.wait()
