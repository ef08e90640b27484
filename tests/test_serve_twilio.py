"""``serve``'s phone route with the fake Twilio caller: the signature at the
upgrade, bad starts, idle and too-fast callers, marks not echoed; and the
helpers the other phone tests share. The call itself (a question answered,
speech over it cleared, a hang-up) is test_serve_phone_carriers', per carrier."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from serve_helpers import LONG_REPLY, listening_pipeline, write_pipeline

from voice_membrane.listening.settings import EndpointSettings
from voice_membrane.server import Server
from voice_membrane.server.twilio_call import TwilioCall
from voice_membrane.testing.fake_twilio import CallEnded, CallRefused, FakeTwilioCall, twilio_call

pytest.importorskip("pocketsphinx")

ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT / "audio_fixtures" / "speech"
QUESTION = SPEECH / "phone" / "weather_paris.wav"
STOP = SPEECH / "backchannels" / "stop.wav"
TOKEN = "twilio-auth-token-for-the-tests"
GUARD_S = 120  # against a hang only: the machine is shared and loaded
WARMUP_S = EndpointSettings().echo_warmup_s


@asynccontextmanager
async def phone_server(folder: Path, **options: Any) -> AsyncIterator[tuple[Server, list[Any]]]:
    lines: list[Any] = []
    paths = [
        listening_pipeline(folder, "long", LONG_REPLY),
        write_pipeline(folder, "deaf", "Hello."),  # no [stt]: it cannot take a call
    ]
    log = lambda event, **fields: lines.append((event, fields))  # noqa: E731
    async with Server(paths, port=0, log=log, **options) as server:
        yield server, lines


def call_url(server: Server) -> str:
    return server.ws_url.replace("/v1/session", "/v1/twilio")


def events(lines: list[Any], name: str) -> list[dict[str, Any]]:
    return [fields for event, fields in lines if event == name]


async def answer_heard(call: FakeTwilioCall, after: float, seconds: float) -> float:
    """When the first answer media came after ``after``, once ``seconds`` of it came."""
    await call.wait_for(
        lambda: sum(len(m.samples) for m in call.media_after(after)) >= seconds * 8000, GUARD_S
    )
    first = call.first_media_after(after)
    assert first is not None, f"no answer (call closed {call.close_code} {call.close_reason})"
    return first


@pytest.mark.anyio
async def test_the_signature_is_checked_before_any_work(tmp_path: Path) -> None:
    async with phone_server(tmp_path, twilio_auth_token=TOKEN) as (server, lines):
        url = call_url(server)
        for options in [{}, {"auth_token": "another token"}, {"signature": "AAAA"}]:
            with pytest.raises(CallRefused) as refused:
                async with twilio_call(url, **options):
                    pass
            assert refused.value.status == 403
        assert server.state is not None and server.state.sessions == 0
        assert not events(lines, "session_start")
        # Signed for the URL Twilio called: wss:// + the Host it connected to.
        public = url.replace("ws://", "wss://")
        with anyio.fail_after(GUARD_S):
            async with twilio_call(
                url, auth_token=TOKEN, signed_url=public, parameters={"pipeline": "deaf"}
            ) as call:
                await call.wait_for(lambda: False, GUARD_S)  # until the server closes
        # Past the gate: refused by the pipeline, which does not listen.
        assert (call.close_code, call.close_reason) == (1008, "pipeline_does_not_listen")
    assert "another token" not in repr(lines) and TOKEN not in repr(lines)


@pytest.mark.anyio
async def test_a_configured_public_url_is_what_the_signature_covers(tmp_path: Path) -> None:
    public = "wss://voice.example.com/v1/twilio"
    # (a public name needs the sessions' token too: docs/serve.md)
    options = {"token": "a-session-token-of-24-chars", "twilio_auth_token": TOKEN}
    async with phone_server(tmp_path, twilio_url=public, **options) as (server, lines):
        url = call_url(server)
        with pytest.raises(CallRefused):  # signed for the address the server sees
            async with twilio_call(url, auth_token=TOKEN):
                pass
        with anyio.fail_after(GUARD_S):
            async with twilio_call(url, auth_token=TOKEN, signed_url=public) as call:
                while not events(lines, "session_start"):
                    await anyio.sleep(0.05)
        assert call.close_code == 1000  # the caller hung up: the call was taken


@pytest.mark.anyio
async def test_bad_starts_close_the_call_in_one_line(tmp_path: Path) -> None:
    async with phone_server(tmp_path) as (server, lines):
        url = call_url(server)
        with anyio.fail_after(GUARD_S):
            async with twilio_call(
                url, media_format={"encoding": "audio/x-l16", "sampleRate": 16000, "channels": 1}
            ) as call:
                await call.wait_for(lambda: False, GUARD_S)
            assert (call.close_code, call.close_reason) == (1008, "unsupported media format")
            assert any(
                f["message"].startswith("unsupported media format 'audio/x-l16' 16000 Hz")
                for f in events(lines, "call_failed")
            )
            async with twilio_call(url, parameters={"pipeline": "nope"}) as call:
                await call.wait_for(lambda: False, GUARD_S)
            assert (call.close_code, call.close_reason) == (1008, "pipeline_not_allowed")
        # A browser may not open the phone route.
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus

        with pytest.raises(InvalidStatus) as refused:
            async with connect(url, origin="http://127.0.0.1"):  # type: ignore[arg-type]
                pass
        assert refused.value.response.status_code == 403


@pytest.mark.anyio
async def test_a_silent_caller_is_closed_by_the_idle_timeout(tmp_path: Path) -> None:
    async with phone_server(tmp_path, idle_timeout_s=1.0) as (server, lines):
        with anyio.fail_after(GUARD_S):
            async with twilio_call(call_url(server), parameters={"pipeline": "long"}) as call:
                await call.wait_for(lambda: False, GUARD_S)  # silence, 50 frames a second
    assert (call.close_code, call.close_reason) == (4408, "idle_timeout")
    assert events(lines, "idle_timeout")


@pytest.mark.anyio
async def test_audio_far_faster_than_real_time_is_refused_then_closed(tmp_path: Path) -> None:
    # Past the burst (3 s) and the patience (2 s) allowed, sent at once
    tone = (np.sin(np.arange(8000 * 8) / 5) * 8000).astype(np.int16)
    async with phone_server(tmp_path) as (server, lines):
        with anyio.fail_after(GUARD_S):
            async with twilio_call(
                call_url(server), parameters={"pipeline": "long"}, speed=0
            ) as call:
                with contextlib.suppress(CallEnded):
                    await call.say(tone)
                await call.wait_for(lambda: False, GUARD_S)
    assert (call.close_code, call.close_reason) == (1008, "rate_limited")
    assert [f for f in events(lines, "error") if f.get("code") == "rate_limited"]


@pytest.mark.anyio
async def test_without_mark_echoes_an_interrupted_answer_is_heard_as_far_as_it_played(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the history keeps of the answer: the turn's heard text.
    heard: list[str] = []
    ended = TwilioCall.voice_turn_ended

    def record(self: TwilioCall, turn: Any) -> None:
        heard.append(turn.result.spoken_text)
        ended(self, turn)

    monkeypatch.setattr(TwilioCall, "voice_turn_ended", record)
    async with phone_server(tmp_path) as (server, lines):
        with anyio.fail_after(GUARD_S):
            async with twilio_call(
                call_url(server), parameters={"pipeline": "long"}, echo_marks=False
            ) as call:
                question = await call.say(QUESTION, silence_after_s=0.3)
                await answer_heard(call, question.ended, WARMUP_S + 0.8)
                await call.say(STOP)
                await call.wait_for(lambda: bool(events(lines, "turn_end")), GUARD_S)
                played_s = len(call.heard_audio()) / 8000
    assert call.marks_received and not call.marks_echoed  # a stream that never echoes
    assert events(lines, "turn_end")[0]["interrupted"] is True
    # Seconds of the answer played: heard is its beginning, not "" nor all of it.
    assert played_s > WARMUP_S
    assert heard and 0 < len(heard[0]) < len(LONG_REPLY)
    assert LONG_REPLY.startswith(heard[0].split()[0])
