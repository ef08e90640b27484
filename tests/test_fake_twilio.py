"""The fake Twilio caller against a tiny scripted server: the signature, the start,
real-time caller audio, playback with mark echoes, clear, DTMF, hanging up."""

from __future__ import annotations

import base64
import json
import math
import time
import wave
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import numpy as np
import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from voice_membrane.server.twilio_signature import signature_matches
from voice_membrane.server.twilio_wire import (
    BadTwilioMessage,
    Connected,
    Dtmf,
    Media,
    Start,
    Stop,
    clear_message,
    mark_message,
    media_message,
    parse_twilio_message,
)
from voice_membrane.server.twiml import stream_twiml
from voice_membrane.testing.fake_twilio import CallEnded, CallRefused, twilio_call
from voice_membrane.testing.fake_twilio_audio import mulaw_frames
from voice_membrane.vocab.audio import ulaw_from_pcm16

ROOT = Path(__file__).resolve().parent.parent
QUESTION = ROOT / "audio_fixtures" / "speech" / "phone" / "weather_paris.wav"
TOKEN = "a-twilio-auth-token-for-tests"
GUARD_S = 30  # against a hang only

Script = Callable[[ServerConnection, list[Any]], Awaitable[None]]


@asynccontextmanager
async def scripted_server(
    script: Script, token: str | None = TOKEN
) -> AsyncIterator[tuple[str, list[Any]]]:
    """A WebSocket server that checks the signature, records every message it gets
    (parsed with the server's own Twilio parser, with its arrival time) and runs
    ``script`` beside the recording."""
    received: list[Any] = []
    url_box: list[str] = []

    def check(connection: ServerConnection, request: Request) -> Response | None:
        signature = request.headers.get("X-Twilio-Signature")
        path, _, query = request.path.partition("?")
        if path == "/v1/twilio/twiml":  # the voice webhook, as serve answers it
            webhook = url_box[0].replace("ws://", "http://") + "/twiml?" + query
            if token is None or not signature_matches(token, webhook, signature):
                return connection.respond(403, "bad signature\n")
            call_sid = parse_qs(query)["CallSid"][0]
            received.append((time.perf_counter(), ("twiml", call_sid)))
            return connection.respond(
                200, stream_twiml(url_box[0].replace("ws://", "wss://"), token=f"T-{call_sid}")
            )
        if token is not None and not signature_matches(token, url_box[0], signature):
            return connection.respond(403, "bad signature\n")
        return None

    async def handler(ws: ServerConnection) -> None:
        async def record() -> None:
            try:
                async for data in ws:
                    try:
                        message: Any = parse_twilio_message(data)
                    except BadTwilioMessage as exc:
                        message = exc
                    received.append((time.perf_counter(), message))
            except ConnectionClosed as exc:
                received.append((time.perf_counter(), exc))
            else:
                received.append((time.perf_counter(), "closed"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(record)
            await script(ws, received)

    async with serve(handler, "127.0.0.1", 0, process_request=check) as server:
        port = server.sockets[0].getsockname()[1]
        url_box.append(f"ws://127.0.0.1:{port}/v1/twilio")
        yield url_box[0], received


async def idle(ws: ServerConnection, received: list[Any]) -> None:
    await ws.wait_closed()


def of_type(received: list[Any], kind: type) -> list[Any]:
    return [m for _, m in received if isinstance(m, kind)]


@pytest.mark.anyio
async def test_a_signed_call_is_accepted_and_a_wrong_or_missing_signature_refused() -> None:
    async with scripted_server(idle) as (url, _):
        async with twilio_call(url, auth_token=TOKEN) as call:
            assert call.close_code is None
        with pytest.raises(CallRefused) as refused:
            async with twilio_call(url, auth_token="not the token"):
                pass
        assert refused.value.status == 403
        with pytest.raises(CallRefused):
            async with twilio_call(url):
                pass
        with pytest.raises(CallRefused):
            async with twilio_call(url, signature="AAAA"):
                pass


@pytest.mark.anyio
async def test_the_caller_speaks_in_real_time_between_silences() -> None:
    with wave.open(str(QUESTION), "rb") as wav:
        seconds = wav.getnframes() / wav.getframerate()
    with anyio.fail_after(GUARD_S):
        async with (
            scripted_server(idle) as (url, received),
            twilio_call(url, auth_token=TOKEN, parameters={"pipeline": "local-voice"}) as call,
        ):
            await anyio.sleep(0.2)
            spoken = await call.say(QUESTION, silence_after_s=0.2)
            await anyio.sleep(0.1)
    messages = [m for _, m in received[1:]]
    assert isinstance(messages[0], Connected)
    start = messages[1]
    assert isinstance(start, Start)
    # As Twilio: the TwiML fetched for the call first, its parameters in start.
    assert received[0][1] == ("twiml", call.call_sid)
    assert start.start.callSid == call.call_sid
    assert start.start.customParameters == {
        "token": f"T-{call.call_sid}",
        "pipeline": "local-voice",
    }
    assert start.stream_sid == call.stream_sid
    media = of_type(received, Media)
    assert [m.media.chunk for m in media] == list(range(1, len(media) + 1))
    assert [m.media.timestamp for m in media] == [20 * i for i in range(len(media))]
    assert all(len(m.media.payload) == 160 for m in media)
    assert isinstance(messages[-2], Stop) and messages[-1] == "closed"  # hung up on leaving
    # Silence, then the question as μ-law 8 kHz (band-limited from the fixture's 16 kHz).
    sent = b"".join(m.media.payload for m in media)
    with wave.open(str(QUESTION), "rb") as wav:
        pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.int16)
    frames, padding = mulaw_frames(pcm, 16000)
    expected = b"".join(frames)
    assert len(expected) == 160 * math.ceil(seconds * 50 - 1e-9)
    assert expected.endswith(b"\xff" * padding) and 0 <= padding < 160
    assert len(expected) - padding == round(seconds * 8000)  # the question's own samples
    # dated as a microphone would: its first sample a frame before its frame went
    # out, its last before the padding of its last frame
    assert spoken.onset == pytest.approx(spoken.started - 0.02)
    assert spoken.end == pytest.approx(spoken.ended - padding / 8000)
    assert sent.find(expected) >= 0.15 * 8000
    assert sent.endswith(b"\xff" * 160)  # silence after
    # In real time: the speech took about as long to send as to say (no upper bound
    # asserted: the machine is shared).
    assert spoken.ended - spoken.started >= 0.8 * (seconds - 0.3)


@pytest.mark.anyio
async def test_faster_than_real_time_when_asked() -> None:
    tone = (np.sin(np.arange(16000) / 5) * 8000).astype(np.int16)  # 2 s at 8 kHz
    with anyio.fail_after(GUARD_S):
        async with (
            scripted_server(idle) as (url, received),
            twilio_call(url, auth_token=TOKEN, speed=0) as call,
        ):
            spoken = await call.say(tone)
    assert spoken.ended - spoken.started < 1.5  # (a fault test's flood: not a speed target)
    sent = b"".join(m.media.payload for m in of_type(received, Media))
    assert ulaw_from_pcm16(tone) in sent


def tone_frames(seconds: float, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    ulaw = ulaw_from_pcm16(rng.integers(-6000, 6000, round(seconds * 8000)).astype(np.int16))
    return [ulaw[i : i + 160] for i in range(0, len(ulaw), 160)]


@pytest.mark.anyio
async def test_marks_are_echoed_after_playback_and_a_clear_returns_the_pending_ones() -> None:
    sent_at: dict[str, float] = {}

    async def script(ws: ServerConnection, received: list[Any]) -> None:
        while not of_type(received, Start):
            await anyio.sleep(0.01)
        sid = of_type(received, Start)[0].stream_sid
        sent_at["first"] = time.perf_counter()
        for frame in tone_frames(0.5, 1):  # half a second at once: the phone queues it
            await ws.send(media_message(sid, frame))
        await ws.send(mark_message(sid, "a"))
        for frame in tone_frames(1.0, 2):
            await ws.send(media_message(sid, frame))
        await ws.send(mark_message(sid, "b"))
        await anyio.sleep(0.8)  # "a" has played, "b" has not
        sent_at["clear"] = time.perf_counter()
        await ws.send(clear_message(sid))
        await ws.send(json.dumps({"event": "surprise", "streamSid": sid}))
        await ws.wait_closed()

    with anyio.fail_after(GUARD_S):
        async with (
            scripted_server(script) as (url, received),
            twilio_call(url, auth_token=TOKEN) as call,
        ):
            await call.wait_for(lambda: len(call.marks_echoed) == 2, GUARD_S)
            await anyio.sleep(0.1)
    echoed = {name: (at, cleared) for name, at, cleared in call.marks_echoed}
    assert echoed["a"][0] - sent_at["first"] >= 0.45 and not echoed["a"][1]
    assert echoed["b"][1] and echoed["b"][0] >= sent_at["clear"]  # returned by the clear
    # Echoes as Twilio sends them, in order: "a" then "b".
    marks = [m.mark.name for _, m in received if getattr(m, "event", None) == "mark"]
    assert marks == ["a", "b"]
    assert call.clears and call.first_clear_after(sent_at["first"]) == call.clears[0]
    assert len(call.received_audio()) == 12000
    heard = len(call.heard_audio()) / 8000
    assert 0.6 <= heard < 1.4  # played until the clear (0.8 s after the audio came)
    assert call.other == [{"event": "surprise", "streamSid": call.stream_sid}]


@pytest.mark.anyio
async def test_keys_go_out_as_twilio_sends_them() -> None:
    with anyio.fail_after(GUARD_S):
        async with (
            scripted_server(idle) as (url, received),
            twilio_call(url, auth_token=TOKEN) as call,
        ):
            await call.press("7")
            await call.send_raw("not json")
    assert [d.dtmf.digit for d in of_type(received, Dtmf)] == ["7"]
    assert of_type(received, Dtmf)[0].streamSid == call.stream_sid


@pytest.mark.anyio
async def test_a_start_in_another_format_goes_out_as_declared() -> None:
    async def script(ws: ServerConnection, received: list[Any]) -> None:
        while len(received) < 2:
            await anyio.sleep(0.01)
        await ws.close(1008, "unsupported media format")

    with anyio.fail_after(GUARD_S):
        async with (
            scripted_server(script) as (url, received),
            twilio_call(
                url,
                auth_token=TOKEN,
                media_format={"encoding": "audio/x-l16", "sampleRate": 16000, "channels": 1},
            ) as call,
        ):
            await call.wait_for(lambda: False, GUARD_S)  # until the server closes
    refused = received[2][1]  # (the TwiML, connected, then the start)
    assert isinstance(refused, BadTwilioMessage)
    assert str(refused).startswith("unsupported media format 'audio/x-l16' 16000 Hz")
    assert (call.close_code, call.close_reason) == (1008, "unsupported media format")


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["hang_up", "drop"])
async def test_hanging_up_mid_sentence(how: str) -> None:
    with anyio.fail_after(GUARD_S):
        async with scripted_server(idle) as (url, received):
            async with (
                twilio_call(url, auth_token=TOKEN) as call,
                anyio.create_task_group() as tg,
            ):
                ended: list[CallEnded] = []

                async def say() -> None:
                    try:
                        await call.say(QUESTION)
                    except CallEnded as exc:
                        ended.append(exc)

                tg.start_soon(say)
                await anyio.sleep(0.5)
                if how == "hang_up":
                    await call.hang_up()
                else:
                    call.drop()
                await anyio.sleep(0.2)
                assert ended  # the sentence was cut
            while not received or not isinstance(received[-1][1], ConnectionClosed | str):
                await anyio.sleep(0.01)
    end = received[-1][1]
    if how == "hang_up":
        assert isinstance(received[-2][1], Stop) and end == "closed"
    else:
        assert isinstance(end, ConnectionClosed) and end.rcvd is None  # no close frame
        assert not of_type(received, Stop)


def test_media_payloads_decode_back_to_what_was_sent() -> None:
    frame = tone_frames(0.02, 3)[0]
    message = parse_twilio_message(
        media_message("MZ1", frame).replace('"media":{', '"media":{"track":"outbound",')
    )
    assert isinstance(message, Media)
    assert base64.b64encode(message.media.payload) == base64.b64encode(frame)


@pytest.mark.anyio
async def test_without_a_clear_everything_received_is_heard() -> None:
    async def script(ws: ServerConnection, received: list[Any]) -> None:
        while not of_type(received, Start):
            await anyio.sleep(0.01)
        sid = of_type(received, Start)[0].stream_sid
        for frame in tone_frames(0.1, 4):
            await ws.send(media_message(sid, frame))
        await ws.wait_closed()

    with anyio.fail_after(GUARD_S):
        async with (
            scripted_server(script) as (url, _),
            twilio_call(url, auth_token=TOKEN) as call,
        ):
            await call.wait_for(lambda: len(call.media) == 5, GUARD_S)
    assert np.array_equal(call.heard_audio(), call.received_audio())
    assert len(call.heard_audio()) == 800
