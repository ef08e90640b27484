"""The cloud-TTS measurement: what our engine code adds over the raw protocol.

The speech fakes run in a child process (``fakes``), each answering after a
fixed time to first byte. Per cloud engine, on the same first piece of text:

- **raw**: a bare client of the wire protocol, the floor (the fake's TTFB,
  loopback, parsing). The ElevenLabs socket: ``websockets``, compression off as
  the engine has it, open as long as a turn's before the piece (with ``flush``)
  is sent, until the first audio message. HTTP: ``httpx`` on a kept-alive
  connection, the request sent, until the first body bytes.
- **pipeline**: a whole ``Session`` turn (a recorded LLM reply, our chunker, the
  engine, a null sink): first audio minus the arrival of the delta that
  completed the first piece.

*Added* = pipeline - median(raw), per turn, after the setup's warm-up turns.
"""

from __future__ import annotations

import base64
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from .environ import variables
from .fakes import fakes_process
from .stats import median, nearest_rank

if TYPE_CHECKING:
    from ..testing.fake_server import FakeServer

KEY = "bench-key"
VOICE = "fake-voice"
SINK_RATE = 22050
FAKE_REQUESTS = 10_000  # queued in each fake: more than any run asks for


@dataclass(frozen=True, slots=True)
class TtsSetup:
    """The fakes' time to first byte, the recorded reply (its first delta after
    ``llm_first_delta_s``, then one word every ``delta_s``), the turns."""

    ttfb_s: float
    llm_first_delta_s: float
    delta_s: float
    reply: str
    turns: int
    warmup: int


@dataclass
class EngineResult:
    engine: str
    first_piece: str = ""
    raw_ms: list[float] = field(default_factory=list)
    pipeline_ms: list[float] = field(default_factory=list)  # first audio - first-piece delta
    engine_first_byte_ms: list[float] = field(default_factory=list)  # as the pipeline measured
    errors: list[str] = field(default_factory=list)

    def added_ms(self) -> list[float]:
        if not self.raw_ms:
            return []
        floor = median(self.raw_ms)
        return [value - floor for value in self.pipeline_ms]

    @staticmethod
    def p50_p95(values: list[float]) -> tuple[float, float] | None:
        if not values:
            return None
        return median(values), nearest_rank(values, 0.95)


@dataclass
class TtsOverheadResults:
    setup: TtsSetup
    results: list[EngineResult]
    seconds: float


def tts_fakes(args: dict[str, Any]) -> dict[str, FakeServer]:
    """The fakes' recipe (``fakes``): both speech services, answering after ``ttfb_s``."""
    from ..testing.fake_elevenlabs import FakeElevenLabs
    from ..testing.fake_openai_speech import FakeOpenAISpeech
    from ..testing.fake_speech import SpeechScript

    scripts = [SpeechScript(ttfb_s=args["ttfb_s"])] * FAKE_REQUESTS
    return {
        "elevenlabs": FakeElevenLabs(*scripts, api_key=KEY),
        "openai": FakeOpenAISpeech(*scripts, api_key=KEY),
    }


async def _raw_socket(base_url: str, text: str, turns: int, opened_s: float) -> list[float]:
    from websockets.asyncio.client import connect

    url = (
        base_url.replace("http://", "ws://", 1)
        + f"/v1/text-to-speech/{VOICE}/stream-input"
        + f"?model_id=eleven_flash_v2_5&output_format=pcm_{SINK_RATE}"
    )
    times: list[float] = []
    for _ in range(turns):
        async with connect(url, additional_headers={"xi-api-key": KEY}, compression=None) as ws:
            await ws.send(json.dumps({"text": " "}))
            # As in a turn, the socket has been open a while when the first piece comes.
            await anyio.sleep(opened_s)
            sent = time.perf_counter()
            await ws.send(json.dumps({"text": text + " ", "flush": True}))
            first: float | None = None
            async for message in ws:
                data = json.loads(message)
                if first is None and data.get("audio"):
                    base64.b64decode(data["audio"])
                    first = time.perf_counter()
                    await ws.send(json.dumps({"text": ""}))
                if data.get("isFinal"):
                    break
            assert first is not None, "no audio from the fake"
            times.append((first - sent) * 1000)
    return times


async def _raw_http(
    url: str, headers: dict[str, str], body: dict[str, Any], turns: int
) -> list[float]:
    import httpx

    times: list[float] = []
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:
        for _ in range(turns):
            sent = time.perf_counter()
            first: float | None = None
            async with client.stream("POST", url, json=body) as response:
                response.raise_for_status()
                async for chunk in response.aiter_raw():
                    if chunk and first is None:
                        first = time.perf_counter()
            assert first is not None, "no audio from the fake"
            times.append((first - sent) * 1000)
    return times


async def _raw(engine: str, urls: dict[str, str], text: str, setup: TtsSetup) -> list[float]:
    if engine == "elevenlabs":
        return await _raw_socket(urls["elevenlabs"], text, setup.turns, setup.llm_first_delta_s)
    if engine == "elevenlabs-http":
        url = f"{urls['elevenlabs']}/v1/text-to-speech/{VOICE}/stream?output_format=pcm_{SINK_RATE}"
        body = {"text": text, "model_id": "eleven_flash_v2_5"}
        return await _raw_http(url, {"xi-api-key": KEY}, body, setup.turns)
    url = f"{urls['openai']}/audio/speech"
    body = {"model": "gpt-4o-mini-tts", "voice": "alloy", "input": text, "response_format": "pcm"}
    return await _raw_http(url, {"Authorization": f"Bearer {KEY}"}, body, setup.turns)


def _recording(path: Path, setup: TtsSetup) -> Path:
    """The reply word by word: the first after ``llm_first_delta_s``, then one every ``delta_s``."""
    lines: list[dict[str, Any]] = [
        {"format": "voice-membrane-replay", "version": 1, "mode": "chat"}
    ]
    words = setup.reply.split(" ")
    for i, word in enumerate(words):
        t_ms = (setup.llm_first_delta_s + i * setup.delta_s) * 1000
        lines.append({"t_ms": round(t_ms, 1), "text": word + (" " if i < len(words) - 1 else "")})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


async def _pipeline(
    engine_name: str, recording: Path, result: EngineResult, setup: TtsSetup
) -> None:
    from ..pipeline.session import Session
    from ..providers.replay import ReplaySource
    from ..sinks.null import NullSink
    from ..tts.options import TtsOptions
    from ..tts.registry import create_engine

    voice = "alloy" if engine_name == "openai" else VOICE
    engine = create_engine(TtsOptions(spec=f"{engine_name}:{voice}"), SINK_RATE)
    pieces: list[str] = []

    def log(record: dict[str, Any]) -> None:
        if record.get("event") == "tts_input":
            pieces.append(record["text"])

    session = Session(ReplaySource(recording, speed=1.0), engine, NullSink(SINK_RATE), log=log)
    async with session:
        for turn in range(setup.warmup + setup.turns):
            pieces.clear()
            outcome = await session.turn("weather?")
            session.history.clear()  # every turn alike
            if outcome.error:
                result.errors.append(outcome.error)
                continue
            if turn == 0:
                result.first_piece = pieces[0]
            if turn < setup.warmup:
                continue
            report = outcome.report
            first_audio, token = report.first_audio_ms, report.first_chunk_token_ms
            if first_audio is not None and token is not None:
                result.pipeline_ms.append(first_audio - token)
            if report.tts_pieces and report.tts_pieces[0]["first_byte_ms"] is not None:
                result.engine_first_byte_ms.append(report.tts_pieces[0]["first_byte_ms"])


def run_tts_overhead(
    setup: TtsSetup, engines: Sequence[str], log: Callable[[str], None] = print
) -> TtsOverheadResults:
    """Each of ``engines`` (``elevenlabs``, ``elevenlabs-http``, ``openai``) in a
    pipeline, then raw, on the first piece the pipeline gave it."""
    started = time.perf_counter()
    results: list[EngineResult] = []
    with fakes_process(tts_fakes, {"ttfb_s": setup.ttfb_s}) as fakes:
        urls = fakes.urls()
        with (
            variables(
                ELEVENLABS_BASE_URL=urls["elevenlabs"],
                ELEVENLABS_API_KEY=KEY,
                OPENAI_BASE_URL=urls["openai"],
                OPENAI_API_KEY=KEY,
            ),
            tempfile.TemporaryDirectory() as folder,
        ):
            recording = _recording(Path(folder) / "reply.jsonl", setup)
            for engine in engines:
                result = EngineResult(engine)
                log(f"tts bench: {engine} …")
                anyio.run(_pipeline, engine, recording, result, setup)
                if result.first_piece:
                    result.raw_ms = anyio.run(_raw, engine, urls, result.first_piece, setup)
                results.append(result)
    return TtsOverheadResults(setup, results, time.perf_counter() - started)
