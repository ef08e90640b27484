"""A fake phone caller: the WebSocket client side of a carrier's bidirectional
media stream, in the carrier's dialect (``fake_carrier_dialects``: Twilio's,
Telnyx's). ``fake_twilio.twilio_call`` and ``fake_telnyx.telnyx_call`` open one.

It connects as the carrier does (``fake_twilio``: ``X-Twilio-Signature``
computed from an auth token, or a wrong one, or none), sends ``connected`` and
``start`` (with custom parameters), then, like a live call, a 20 ms μ-law ``media`` message every
20 ms for as long as it is connected: the caller's speech when ``say`` gives
some (a WAV fixture or samples, converted to μ-law 8 kHz), silence otherwise.
It can press keys (``dtmf``) and hang up (``stop`` then close) or just drop
the socket.

What the server sends is played as a phone would: media queued and played
back to back in real time; a ``mark`` is echoed once the audio before it has
played; ``clear`` empties the queue (what was not yet played is never heard)
and echoes the pending marks at once, as Twilio documents
(https://www.twilio.com/docs/voice/media-streams/websocket-messages). Every
time is ``time.perf_counter()`` seconds, so a test can compare the caller's
speech (``say`` returns when it started and ended) with the answer's first
media or the ``clear`` that followed.

::

    async with twilio_call(url, auth_token=TOKEN, parameters={"pipeline": "x"}) as call:
        spoken = await call.say("audio_fixtures/speech/phone/weather_paris.wav")
        await call.wait_for(lambda: call.first_media_after(spoken.ended) is not None, 30)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from ..vocab.audio import Samples, pcm16_from_ulaw, ulaw_from_pcm16
from .echo_room import PlayedEcho
from .fake_carrier_dialects import Dialect, TwilioDialect
from .fake_twilio_audio import FRAME, FRAME_S, RATE, SILENCE, join_samples, load_audio, mulaw_frames
from .fake_twilio_webhook import CallRefused


class CallEnded(Exception):
    """The call ended before the caller finished speaking."""


@dataclass(frozen=True, slots=True)
class ReceivedMedia:
    arrived: float  # perf_counter seconds
    starts: float  # when the phone began playing it
    samples: Samples  # PCM 8 kHz, decoded from the μ-law payload


@dataclass(frozen=True, slots=True)
class Spoken:
    started: float  # the first speech frame went out
    ended: float  # the last speech frame went out
    # as a microphone dates them: the audio's first sample was captured a
    # frame (20 ms) before its frame went out; its last ended before the
    # silence its frame was padded with
    onset: float
    end: float


@dataclass(slots=True)
class _Pending:
    name: str
    due: float  # when the audio before it has played


@dataclass(slots=True)
class FakePhoneCall:
    ws: ClientConnection
    stream_sid: str
    call_sid: str
    account_sid: str
    dialect: Dialect = field(default_factory=TwilioDialect)
    speed: float = 1.0  # how fast the caller's audio goes out (0: as fast as possible)
    echo_marks: bool = True  # False: a stream that never sends a mark back
    echo: PlayedEcho | None = None  # the phone's speaker heard by its microphone
    media: list[ReceivedMedia] = field(default_factory=list)
    marks_received: list[tuple[str, float]] = field(default_factory=list)
    marks_echoed: list[tuple[str, float, bool]] = field(default_factory=list)  # cleared?
    clears: list[float] = field(default_factory=list)
    other: list[Any] = field(default_factory=list)  # anything else the server sent
    close_code: int | None = None
    close_reason: str = ""
    _outgoing: deque[bytes] = field(default_factory=deque)  # caller μ-law frames to send
    _sent_all: anyio.Event = field(default_factory=anyio.Event)
    _changed: anyio.Event = field(default_factory=anyio.Event)
    _pending: list[_Pending] = field(default_factory=list)
    _play_ends: float = 0.0
    _cleared_at: list[float] = field(default_factory=list)
    _sequence: int = 0
    _chunk: int = 0
    _started: float = 0.0
    _sending: bool = True
    _speech_frames: dict[int, str] = field(default_factory=dict)  # chunk → start/end
    _spoken_times: dict[str, float] = field(default_factory=dict)
    _echo_queue: list[str] = field(default_factory=list)  # marks a clear sent back
    _replies: list[dict[str, Any]] = field(default_factory=list)  # e.g. Plivo's clearedAudio

    # The caller

    async def say(
        self,
        audio: str | Path | Samples,
        sample_rate: int = RATE,
        *,
        silence_before_s: float = 0.0,
        silence_after_s: float = 0.0,
    ) -> Spoken:
        """Send speech (a 16-bit mono WAV, or samples at ``sample_rate``) as the
        caller, at the call's ``speed``; returns when its last frame went out."""
        if self.close_code is not None:
            raise CallEnded(f"the call ended (close code {self.close_code})")
        samples, rate = load_audio(audio, sample_rate)
        frames, padding = mulaw_frames(samples, rate)
        if not frames:
            raise ValueError("nothing to say: the audio is empty")
        gap_before = [SILENCE] * round(silence_before_s / FRAME_S)
        gap_after = [SILENCE] * round(silence_after_s / FRAME_S)
        first = self._chunk + len(self._outgoing) + len(gap_before) + 1
        last = first + len(frames) - 1
        self._speech_frames = {first: "started", last: "ended"}
        self._spoken_times = {}
        self._sent_all = anyio.Event()
        self._outgoing.extend([*gap_before, *frames, *gap_after])
        await self._sent_all.wait()
        if "ended" not in self._spoken_times:
            raise CallEnded(f"the call ended (close code {self.close_code}) mid-sentence")
        started, ended = self._spoken_times["started"], self._spoken_times["ended"]
        frame_s = FRAME_S / self.speed if self.speed > 0 else 0.0  # a frame's time on the line
        return Spoken(started, ended, started - frame_s, ended - frame_s * padding / FRAME)

    async def press(self, digit: str) -> None:
        await self._send(self.dialect.dtmf(digit))

    async def send_raw(self, message: str | bytes) -> None:
        """Anything at all, for fault tests."""
        await self.ws.send(message)

    async def hang_up(self) -> None:
        """What Twilio does when the caller hangs up: ``stop``, then close."""
        self._sending = False
        with contextlib.suppress(ConnectionClosed):
            if (stop := self.dialect.stop(self._ids())) is not None:
                await self._send(stop)
            await self.ws.close()

    def drop(self) -> None:
        """The line goes dead: the socket is cut with no close handshake."""
        self._sending = False
        self.ws.transport.abort()

    # What the server sent

    def received_audio(self) -> Samples:
        """Every sample the server sent, in order (PCM 8 kHz)."""
        return join_samples([m.samples for m in self.media])

    def heard_audio(self) -> Samples:
        """What the caller heard: the audio received, less what a ``clear`` dropped
        before it played."""
        heard = []
        for m in self.media:
            cut = next((c for c in self._cleared_at if c >= m.arrived), None)
            if cut is None:
                heard.append(m.samples)
                continue
            playable = max(0, min(len(m.samples), math.floor((cut - m.starts) * RATE)))
            heard.append(m.samples[:playable])
        return join_samples(heard)

    def first_media_after(self, t: float) -> float | None:
        return next((m.arrived for m in self.media if m.arrived >= t), None)

    def first_clear_after(self, t: float) -> float | None:
        return next((c for c in self.clears if c >= t), None)

    def media_after(self, t: float) -> list[ReceivedMedia]:
        return [m for m in self.media if m.arrived > t]

    async def wait_for(self, condition: Callable[[], bool], timeout_s: float) -> None:
        """Until ``condition()`` holds (checked on each message); TimeoutError after
        ``timeout_s``, or ConnectionClosed-like end: returns once closed too."""
        with anyio.fail_after(timeout_s):
            while not condition():
                if self.close_code is not None:
                    return
                changed = self._changed
                await changed.wait()

    # The machinery

    def _ids(self) -> dict[str, str]:
        return {
            "account": self.account_sid,
            "call": self.call_sid,
            "stream": self.stream_sid,
            "session": "session-" + self.stream_sid,
        }

    async def _send(self, message: dict[str, Any]) -> None:
        self._sequence += 1
        await self.ws.send(json.dumps(self.dialect.stamp(message, self._sequence, self.stream_sid)))

    async def _send_audio(self) -> None:
        """A media message every 20 ms while connected: the caller's queued speech
        (at ``speed``), else silence (in real time)."""
        next_at = time.perf_counter()
        while self._sending:
            speaking = bool(self._outgoing)
            frame = self._outgoing.popleft() if speaking else SILENCE
            self._chunk += 1
            now = time.perf_counter()
            if self.echo is not None:  # (at its place in time, however late it goes out)
                frame = ulaw_from_pcm16(self.echo.into(pcm16_from_ulaw(frame), next_at))
            which = self._speech_frames.get(self._chunk)
            if which is not None:
                self._spoken_times[which] = now
            try:
                await self._send(self.dialect.media(frame, self._chunk))
            except ConnectionClosed:
                return
            if not self._outgoing and not self._sent_all.is_set() and self._spoken_times:
                self._sent_all.set()
            if speaking and self.speed == 0:
                next_at = time.perf_counter()
                await anyio.sleep(0)
            else:
                next_at += FRAME_S / (self.speed if speaking else 1.0)
                await anyio.sleep(max(0.0, next_at - time.perf_counter()))

    async def _receive(self) -> None:
        try:
            async for data in self.ws:
                self._on_message(data)
        except ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code if self.ws.close_code is not None else 1006
            self.close_reason = self.ws.close_reason or ""
            self._sending = False
            self._sent_all.set()
            self._wake()

    def _on_message(self, data: str | bytes) -> None:
        now = time.perf_counter()
        try:
            message = json.loads(data)
            heard = self.dialect.read(message, self.stream_sid)
        except (ValueError, AttributeError, KeyError, TypeError):
            self.other.append(data)
            self._wake()
            return
        value: Any
        event, value = heard if heard is not None else ("", None)
        if event == "media":
            samples = pcm16_from_ulaw(value)
            starts = max(self._play_ends, now)
            self._play_ends = starts + len(samples) / RATE
            self.media.append(ReceivedMedia(now, starts, samples))
            if self.echo is not None:
                self.echo.played(starts, samples)
        elif event == "mark":
            name = value
            self.marks_received.append((name, now))
            if self.echo_marks:
                self._pending.append(_Pending(name, max(self._play_ends, now)))
        elif event == "clear":
            self.clears.append(now)
            self._cleared_at.append(now)
            self._play_ends = now
            if self.echo is not None:
                self.echo.cleared(now)
            pending, self._pending = self._pending, []
            if self.dialect.returns_marks_on_clear:  # Twilio sends them back at once
                for mark in pending:
                    self.marks_echoed.append((mark.name, now, True))
                    self._echo_soon(mark.name)
            if (cleared := self.dialect.cleared()) is not None:
                self._replies.append(cleared)
        else:
            self.other.append(message)
        self._wake()

    def _echo_soon(self, name: str) -> None:
        self._echo_queue.append(name)

    async def _play(self) -> None:
        """Echo each mark once its audio has played (and those a clear returned)."""
        while True:
            while self._replies:
                with contextlib.suppress(ConnectionClosed):
                    await self._send(self._replies.pop(0))
            while self._echo_queue:
                with contextlib.suppress(ConnectionClosed):
                    await self._send(self.dialect.mark(self._echo_queue.pop(0)))
            now = time.perf_counter()
            while self._pending and self._pending[0].due <= now:
                mark = self._pending.pop(0)
                self.marks_echoed.append((mark.name, now, False))
                with contextlib.suppress(ConnectionClosed):
                    await self._send(self.dialect.mark(mark.name))
            if self.close_code is not None:
                return
            delay = self._pending[0].due - now if self._pending else math.inf
            changed = self._changed
            with anyio.move_on_after(delay):
                await changed.wait()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


@asynccontextmanager
async def phone_call(
    url: str,
    dialect: Dialect,
    *,
    headers: Mapping[str, str] | None = None,
    parameters: Mapping[str, str] | None = None,
    media_format: Mapping[str, Any],
    ids: tuple[str, str, str],
    speed: float = 1.0,
    send_start: bool = True,
    echo_marks: bool = True,
    echo: PlayedEcho | None = None,
) -> AsyncIterator[FakePhoneCall]:
    """A call to ``url`` in ``dialect``, its upgrade with ``headers``; ``ids``:
    (stream, call, account). ``CallRefused`` if the upgrade is refused. On
    leaving, the call hangs up (``stop`` and close) unless it ended already."""
    try:
        ws = await connect(url, additional_headers=dict(headers or {}), max_size=2**20)
    except InvalidStatus as exc:
        raise CallRefused(exc.response.status_code) from None
    stream_id, call_id, account_id = ids
    call = FakePhoneCall(
        ws,
        stream_sid=stream_id,
        call_sid=call_id,
        account_sid=account_id,
        dialect=dialect,
        speed=speed,
        echo_marks=echo_marks,
        echo=echo,
    )
    async with ws, anyio.create_task_group() as tg:
        tg.start_soon(call._receive)
        tg.start_soon(call._play)
        if (connected := dialect.connected()) is not None:
            await ws.send(json.dumps(connected))
        if send_start:
            await call._send(dialect.start(call._ids(), parameters or {}, media_format))
            tg.start_soon(call._send_audio)
        try:
            yield call
        finally:
            if call.close_code is None and call._sending:
                await call.hang_up()
            with anyio.move_on_after(5):
                while call.close_code is None:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()


def call_number(url: str) -> int:
    """A number that differs for every call (the ids are made from it)."""
    n = int.from_bytes(hashlib.sha1(url.encode() + str(time.time_ns()).encode()).digest()[:8])
    return n ^ int.from_bytes(os.urandom(8))  # calls started in the same nanosecond differ too
