"""``serve``'s phone routes, one test for every carrier (Twilio, Telnyx, Plivo), each
called by its own fake caller: a spoken question answered, speech over the
answer cleared, a hang-up (or a dropped socket) leaving nothing running, messages out of order
logged in one line each while the call lives; and Telnyx's and Plivo's own
checks (the answer webhook's signature, the call's token in ``start``)."""

from __future__ import annotations

import base64
import json
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from test_serve_twilio import GUARD_S, QUESTION, STOP, WARMUP_S, answer_heard, events, phone_server

from voice_membrane.server import Server
from voice_membrane.testing.fake_phone import FakePhoneCall
from voice_membrane.testing.fake_plivo import plivo_call
from voice_membrane.testing.fake_telnyx import public_key_of, telnyx_call
from voice_membrane.testing.fake_twilio import CallRefused, twilio_call
from voice_membrane.testing.speech_check import analyze_speech

pytest.importorskip("pocketsphinx")
pytestmark = pytest.mark.anyio

CARRIERS = ["twilio", "telnyx", "plivo"]
PLIVO_TOKEN = "plivo-auth-token-for-the-tests"
SESSION_TOKEN = "a-session-token-of-24-chars"


def route(server: Server, carrier: str) -> str:
    return server.ws_url.replace("/v1/session", f"/v1/{carrier}")


def open_call(carrier: str, url: str, **options: Any) -> AbstractAsyncContextManager[FakePhoneCall]:
    opener = {"twilio": twilio_call, "telnyx": telnyx_call, "plivo": plivo_call}[carrier]
    return opener(url, **options)  # type: ignore[operator]


@pytest.mark.parametrize("carrier", CARRIERS)
async def test_a_spoken_question_is_answered_and_speaking_over_it_clears(
    tmp_path: Path, carrier: str
) -> None:
    async with phone_server(tmp_path) as (server, lines):
        with anyio.fail_after(GUARD_S):
            async with open_call(
                carrier, route(server, carrier), parameters={"pipeline": "long"}
            ) as call:
                await anyio.sleep(0.5)
                question = await call.say(QUESTION, silence_after_s=0.3)
                first = await answer_heard(call, question.ended, WARMUP_S + 0.8)
                assert first > question.ended
                onset = time.perf_counter()
                stop = await call.say(STOP)
                await call.wait_for(lambda: call.first_clear_after(onset) is not None, GUARD_S)
                cleared = call.first_clear_after(onset)
                assert cleared is not None and cleared >= stop.started
                await call.wait_for(lambda: bool(events(lines, "barge_in")), GUARD_S)
                await call.wait_for(lambda: bool(events(lines, "turn_end")), GUARD_S)
        heard = call.heard_audio()
        report = analyze_speech(heard, 8000)
        assert report.span_s > 0.5 and report.nuclei >= 2  # the answer was heard as speech
        assert len(heard) < len(call.received_audio()) or call.clears
        starts = events(lines, "turn_start")
        assert starts and starts[0]["source"] == "voice"
        assert {b["action"] for b in events(lines, "barge_in")} & {"pause", "interrupt"}
        assert call.marks_echoed  # what was heard came from the carrier's echoes
        assert not call.other  # nothing the carrier would not take (short media, other ids)
        (start,) = events(lines, "session_start")
        assert (start["carrier"], start["call_sid"]) == (carrier, call.call_sid)
        # The carriers take no metrics event: the log names the call and has each
        # turn's stages (the voice serve benchmark reads them there).
        answered = events(lines, "turn_end")[0]
        assert answered["voice_to_voice"]["voice_to_voice_ms"] is not None
        assert answered["stamps_ms"]["first_audio"] is not None
    assert server.state is not None
    assert (server.state.sessions, server.state.turns_running) == (0, 0)


@pytest.mark.parametrize(
    ("carrier", "how"),
    [("twilio", "hang_up"), ("twilio", "drop"), ("telnyx", "hang_up"), ("plivo", "hang_up")],
)
async def test_a_caller_who_hangs_up_mid_answer_leaves_nothing_running(
    tmp_path: Path, carrier: str, how: str
) -> None:
    async with phone_server(tmp_path) as (server, lines):
        assert server.state is not None
        with anyio.fail_after(GUARD_S):
            async with open_call(
                carrier, route(server, carrier), parameters={"pipeline": "long"}
            ) as call:
                question = await call.say(QUESTION, silence_after_s=0.3)
                await answer_heard(call, question.ended, 0.5)
                assert server.state.turns_running == 1
                if how == "hang_up":
                    await call.hang_up()
                else:  # the socket just goes
                    call.drop()
            while server.state.sessions or server.state.turns_running:
                await anyio.sleep(0.05)
        assert len(events(lines, "session_end")) == 1
        if how == "hang_up" and carrier != "plivo":  # (Plivo documents no stop)
            assert events(lines, "hang_up")


def _media() -> dict[str, Any]:
    return {"event": "media", "media": {"payload": base64.b64encode(b"\xff" * 160).decode()}}


@pytest.mark.parametrize("carrier", CARRIERS)
async def test_messages_out_of_order_are_one_line_each_and_the_call_lives(
    tmp_path: Path, carrier: str
) -> None:
    # (the rate limit's one line a second for bad messages: 1.1 s between them)
    async with phone_server(tmp_path) as (server, lines):
        with anyio.fail_after(GUARD_S):
            async with open_call(
                carrier, route(server, carrier), parameters={"pipeline": "long"}, send_start=False
            ) as call:
                await call._send(_media())  # before start
                await anyio.sleep(1.1)
                start = call.dialect.start(call._ids(), {"pipeline": "long"}, _format(carrier))
                await call._send(start)
                while not events(lines, "session_start"):
                    await anyio.sleep(0.05)
                await anyio.sleep(1.1)
                await call._send(start)  # a second start
                await anyio.sleep(1.1)
                await call._send(call.dialect.mark("vm999"))  # a mark never sent
                await anyio.sleep(1.1)
                await call.send_raw(json.dumps({"event": "surprise"}))
                await anyio.sleep(1.1)
                await call._send(_media())
                assert call.close_code is None  # the call lives
        said = [f["message"] for f in events(lines, "error") if f.get("code") == "bad_message"]
        assert said == [
            "a message before start: dropped",
            "a second start: ignored",
            "a mark this call never sent: ignored",
            said[-1],
        ]
        assert "unknown event 'surprise'" in said[-1]
    assert server.state is not None and server.state.sessions == 0


def _format(carrier: str) -> dict[str, Any]:
    if carrier == "twilio":
        return {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
    if carrier == "plivo":
        return {"encoding": "audio/x-mulaw", "sampleRate": 8000}
    return {"encoding": "PCMU", "sample_rate": 8000, "channels": 1}


async def test_telnyx_calls_need_a_signed_webhook_and_the_call_s_token(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    options = {"telnyx_public_key": public_key_of(key), "token": SESSION_TOKEN}
    async with phone_server(tmp_path, **options) as (server, lines):
        url = route(server, "telnyx")
        for forger in [Ed25519PrivateKey.generate()]:
            with pytest.raises(CallRefused) as refused:
                async with telnyx_call(url, signing_key=forger):
                    pass
            assert refused.value.status == 403
        # Unsigned: the upgrade is let through, the start without a token is not.
        with anyio.fail_after(GUARD_S):
            async with telnyx_call(url, parameters={"pipeline": "long"}) as call:
                await call.wait_for(lambda: False, GUARD_S)
        assert (call.close_code, call.close_reason) == (4401, "unauthorized")
        (refusal,) = [f for f in events(lines, "refused") if f["reason"] == "unauthorized"]
        assert refusal["message"].startswith("no call token in start: serve's TeXML")
        assert not events(lines, "session_start")
        with anyio.fail_after(GUARD_S):
            async with telnyx_call(url, signing_key=key, parameters={"pipeline": "long"}) as call:
                while not events(lines, "session_start"):
                    await anyio.sleep(0.05)
        assert call.close_code == 1000  # the caller hung up: the call was taken
        refused_lines = [f for f in events(lines, "http_refused") if f["path"].endswith("/texml")]
        assert (
            refused_lines
            and refused_lines[0]["reason"] == "telnyx-signature-ed25519 does not match"
        )
    assert SESSION_TOKEN not in repr(lines)


async def test_a_public_key_without_the_sessions_token_is_refused_at_start(tmp_path: Path) -> None:
    from voice_membrane.pipeline.config import ConfigError

    key = public_key_of(Ed25519PrivateKey.generate())
    with pytest.raises(ConfigError, match="TELNYX_PUBLIC_KEY needs the sessions' token"):
        async with phone_server(tmp_path, telnyx_public_key=key):
            pass


async def test_plivo_calls_need_a_signed_answer_url_and_the_call_s_token(tmp_path: Path) -> None:
    public = "wss://voice.example.com/v1/plivo"
    options = {"plivo_auth_token": PLIVO_TOKEN, "plivo_url": public, "token": SESSION_TOKEN}
    async with phone_server(tmp_path, **options) as (server, lines):
        url = route(server, "plivo")
        forged = {"auth_token": "another token", "signed_url": public}
        for wrong in [forged, {"auth_token": PLIVO_TOKEN}]:  # (the 2nd: for the address seen)
            with pytest.raises(CallRefused) as refused:
                async with plivo_call(url, **wrong):
                    pass
            assert refused.value.status == 403
        # Unsigned: the upgrade is let through, the start without a token is not.
        with anyio.fail_after(GUARD_S):
            async with plivo_call(url, parameters={"pipeline": "long"}) as call:
                await call.wait_for(lambda: False, GUARD_S)
        assert (call.close_code, call.close_reason) == (4401, "unauthorized")
        (refusal,) = [f for f in events(lines, "refused") if f["reason"] == "unauthorized"]
        assert refusal["message"].startswith("no call token in start: serve's answer XML")
        assert not events(lines, "session_start")
        with anyio.fail_after(GUARD_S):
            async with plivo_call(
                url, auth_token=PLIVO_TOKEN, signed_url=public, parameters={"pipeline": "long"}
            ) as call:
                while not events(lines, "session_start"):
                    await anyio.sleep(0.05)
        assert call.close_code == 1000  # the caller hung up: the call was taken
        refused_lines = [f for f in events(lines, "http_refused") if f["path"].endswith("/answer")]
        assert len(refused_lines) == 2
    assert PLIVO_TOKEN not in repr(lines) and SESSION_TOKEN not in repr(lines)
