"""An STT that refuses a stream — 429 and 429 again on the retry, 401 (a revoked
key), or nothing listening on its port — costs the utterance it hit, never the
session: the client gets ``stt_error`` (a phone call: the log line), the server
logs what the STT answered (no key), and the next utterance, once the service
is back, is heard and answered. Real sockets: the fake Deepgram on loopback, a
served session on /v1/session and a call on /v1/twilio."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from serve_helpers import SHORT_REPLY, start, write_pipeline
from serve_voice_helpers import Received, clip, silence, speak
from websockets.asyncio.client import connect

from voice_membrane.server.server import Server
from voice_membrane.testing.fake_deepgram import FakeDeepgram
from voice_membrane.testing.fake_twilio import twilio_call
from voice_membrane.testing.transcript_script import TranscriptScript

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
HEARD = "what is the weather like today"
KEY = "dg-secret-" + "k" * 30
VOICE_IN = {"encoding": "pcm16", "sample_rate": 16000, "frame_ms": 20}
GUARD_S = 60  # against a hang on a loaded machine, not a timing check
REFUSED = {  # the fake's answers to the first utterance, and what the client is told
    "429_twice": ([TranscriptScript.http_error(429), TranscriptScript.http_error(429)], "429"),
    "401": ([TranscriptScript.http_error(401)], "401"),
    "unreachable": ([], "connection failed"),
}


class Gate:
    """A loopback port in front of the fake: while closed nothing listens there
    (a connection is refused, as from a service that is down); once opened it
    forwards every connection to the fake."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        self.port = self.sock.getsockname()[1]
        self._server: asyncio.Server | None = None

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._forward, sock=self.sock)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self.sock.close()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@asynccontextmanager
async def refusing_stt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> AsyncIterator[tuple[Path, Gate | None]]:
    """The fake Deepgram refusing the first utterance as ``fault`` says, then
    hearing ``HEARD``; a listening pipeline on it."""
    refusals, _ = REFUSED[fault]
    with FakeDeepgram(*refusals, TranscriptScript.of(HEARD, word_s=0.2), api_key=KEY) as ears:
        gate = Gate(ears.port) if fault == "unreachable" else None
        try:
            monkeypatch.setenv("DEEPGRAM_API_KEY", KEY)
            monkeypatch.delenv("DEEPGRAM_BASE_URL", raising=False)
            base_url = ears.base_url if gate is None else f"http://127.0.0.1:{gate.port}"
            path = write_pipeline(tmp_path, "ears", SHORT_REPLY)
            path.write_text(
                path.read_text() + f'\n[stt]\nspec = "deepgram:nova-3"\nbase_url = "{base_url}"\n\n'
                '[endpoint]\necho = "aec"\n'
            )
            yield path, gate
        finally:
            if gate is not None:
                await gate.close()


def logger(lines: list[tuple[str, dict[str, Any]]]) -> Callable[..., None]:
    return lambda event, **fields: lines.append((event, fields))


def question() -> Any:
    return np.concatenate([silence(0.3), clip("weather")])


@pytest.mark.parametrize("fault", list(REFUSED))
async def test_a_refused_stt_stream_costs_the_utterance_not_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    lines: list[tuple[str, dict[str, Any]]] = []
    async with (
        refusing_stt(tmp_path, monkeypatch, fault) as (path, gate),
        Server([path], port=0, log=logger(lines)) as server,
        connect(server.ws_url) as ws,
    ):
        await start(ws, pipeline="ears", input_audio=VOICE_IN)

        def failed(r: Received) -> bool:
            return bool(r.of("error")) or bool(r.of("turn.started"))

        got = await speak(ws, question(), until=failed, guard_s=GUARD_S)
        (error,) = got.of("error")
        assert error["code"] == "stt_error" and REFUSED[fault][1] in error["message"]
        assert "say it again" in error["message"]
        assert not got.of("turn.started")

        # The service is back: the next utterance is heard and answered, in the
        # same session.
        if gate is not None:
            await gate.open()
        got = await speak(ws, question(), until=lambda r: r.turn_end(1) is not None)
        (turn,) = got.of("turn.started")
        assert turn["text"] == HEARD and turn["source"] == "voice"
        assert not got.of("error")
        assert ws.close_code is None
    logged = [f for e, f in lines if e == "error"]
    assert [f["code"] for f in logged] == ["stt_error"]
    assert REFUSED[fault][1] in logged[0]["message"]
    assert KEY not in json.dumps(lines, default=str)
    metrics = server.state.metrics.render().decode()  # type: ignore[union-attr]
    assert 'voice_membrane_errors_total{kind="stt_error"} 1.0' in metrics


async def test_a_phone_call_outlives_a_refused_stt_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[tuple[str, dict[str, Any]]] = []
    phone = ROOT / "audio_fixtures" / "speech" / "phone" / "weather_paris.wav"
    async with (
        refusing_stt(tmp_path, monkeypatch, "429_twice") as (path, _),
        Server([path], port=0, log=logger(lines)) as server,
    ):
        url = server.ws_url.replace("/v1/session", "/v1/twilio")
        with anyio.fail_after(GUARD_S):
            async with twilio_call(url) as call:
                await call.say(phone, silence_before_s=0.3, silence_after_s=0.2)
                while not any(e == "error" for e, _ in lines):  # (a call takes no events)
                    await anyio.sleep(0.05)
                await call.say(phone, silence_before_s=0.3)
                while not any(e == "turn_end" for e, _ in lines):
                    await anyio.sleep(0.05)
                assert call.close_code is None
    (error,) = [f for e, f in lines if e == "error"]
    assert error["code"] == "stt_error" and "429" in error["message"]
    (started,) = [f for e, f in lines if e == "turn_start"]
    assert started["source"] == "voice"
    assert KEY not in json.dumps(lines, default=str)
