"""Cloud TTS benchmark: what our engine code adds over the raw protocol.

The fake servers (``FakeElevenLabs``, ``FakeOpenAISpeech``) run in a child
process, as a real service is elsewhere, each answering after a fixed time to
first byte (``TTFB_S``). For every cloud engine two things are measured on the
same first piece of text:

- **raw**: a bare client speaking the wire protocol — for the ElevenLabs socket,
  ``websockets`` (compression off, as the engine has it: permessage-deflate of
  base64 audio cost ~3 ms per frame here) on a socket opened
  ``LLM_FIRST_DELTA_S`` earlier (as a turn's is): the piece's text (with
  ``flush``) sent, until the first audio message; for the HTTP engines,
  ``httpx`` on a kept-alive connection: the request sent, until the first body
  bytes. This is the floor: the fake's TTFB plus loopback and parsing.
- **pipeline**: a whole ``Session`` turn — a recorded LLM reply (first delta
  after ``LLM_FIRST_DELTA_S``, as a model's first token), our chunker, the
  engine, a null sink — whose first audio (the sink's first write) minus the
  arrival of the delta that completed the first piece is the TTS part of first
  audio as the pipeline sees it.

*Added* = pipeline - median(raw), per turn: our engine, stream and sink code on
the path to the first audio. ``TURNS`` turns per engine after ``WARMUP`` (the
fake's espeak cache fills, connections are made).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from benchmarks.child import child_process
from benchmarks.stats import median, nearest_rank

TTFB_S = 0.1
LLM_FIRST_DELTA_S = 0.15
DELTA_S = 0.02
TURNS = 20
WARMUP = 2
KEY = "bench-key"
VOICE = "fake-voice"
REPLY = (
    "The weather stays mild and dry today, with a light breeze in the afternoon "
    "and clear skies by evening."
)
ENGINES = ("elevenlabs", "elevenlabs-http", "openai")
SINK_RATE = 22050


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
class TtsBenchResults:
    results: list[EngineResult]
    seconds: float
    turns: int
    warmup: int


# --------------------------------------------------------------------------- the fakes


def _serve() -> None:
    from voice_membrane.testing.fake_elevenlabs import FakeElevenLabs
    from voice_membrane.testing.fake_openai_speech import FakeOpenAISpeech
    from voice_membrane.testing.fake_speech import SpeechScript

    scripts = [SpeechScript(ttfb_s=TTFB_S)] * 10_000
    eleven = FakeElevenLabs(*scripts, api_key=KEY).start()
    openai = FakeOpenAISpeech(*scripts, api_key=KEY).start()
    print(json.dumps({"elevenlabs": eleven.base_url, "openai": openai.base_url}), flush=True)
    sys.stdin.read()  # until the parent closes it


@contextlib.contextmanager
def _served() -> Iterator[dict[str, str]]:
    with child_process("benchmarks.bench_tts_engines", ["--serve"]) as child:
        yield json.loads(child.line)


# --------------------------------------------------------------------------- raw clients


async def _raw_socket(base_url: str, text: str, turns: int) -> list[float]:
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
            await anyio.sleep(LLM_FIRST_DELTA_S)
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


async def _raw(engine: str, urls: dict[str, str], text: str, turns: int) -> list[float]:
    if engine == "elevenlabs":
        return await _raw_socket(urls["elevenlabs"], text, turns)
    if engine == "elevenlabs-http":
        url = f"{urls['elevenlabs']}/v1/text-to-speech/{VOICE}/stream?output_format=pcm_{SINK_RATE}"
        body = {"text": text, "model_id": "eleven_flash_v2_5"}
        return await _raw_http(url, {"xi-api-key": KEY}, body, turns)
    url = f"{urls['openai']}/audio/speech"
    body = {"model": "gpt-4o-mini-tts", "voice": "alloy", "input": text, "response_format": "pcm"}
    return await _raw_http(url, {"Authorization": f"Bearer {KEY}"}, body, turns)


# --------------------------------------------------------------------------- the pipeline


def _recording(path: Path) -> Path:
    lines: list[dict[str, Any]] = [
        {"format": "voice-membrane-replay", "version": 1, "mode": "chat"}
    ]
    words = REPLY.split(" ")
    for i, word in enumerate(words):
        t_ms = (LLM_FIRST_DELTA_S + i * DELTA_S) * 1000
        lines.append({"t_ms": round(t_ms, 1), "text": word + (" " if i < len(words) - 1 else "")})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _spec(engine: str) -> str:
    return f"{engine}:{'alloy' if engine == 'openai' else VOICE}"


async def _pipeline(
    engine_name: str, recording: Path, result: EngineResult, turns: int, warmup: int
) -> None:
    from voice_membrane.pipeline.session import Session
    from voice_membrane.providers.replay import ReplaySource
    from voice_membrane.sinks.null import NullSink
    from voice_membrane.tts.options import TtsOptions
    from voice_membrane.tts.registry import create_engine

    engine = create_engine(TtsOptions(spec=_spec(engine_name)), SINK_RATE)
    pieces: list[str] = []

    def log(record: dict[str, Any]) -> None:
        if record.get("event") == "tts_input":
            pieces.append(record["text"])

    session = Session(ReplaySource(recording, speed=1.0), engine, NullSink(SINK_RATE), log=log)
    async with session:
        for turn in range(warmup + turns):
            pieces.clear()
            outcome = await session.turn("weather?")
            session.history.clear()  # every turn alike
            if outcome.error:
                result.errors.append(outcome.error)
                continue
            if turn == 0:
                result.first_piece = pieces[0]
            if turn < warmup:
                continue
            report = outcome.report
            first_audio, token = report.first_audio_ms, report.first_chunk_token_ms
            if first_audio is not None and token is not None:
                result.pipeline_ms.append(first_audio - token)
            first_byte = report.tts_pieces[0]["first_byte_ms"] if report.tts_pieces else None
            if first_byte is not None:
                result.engine_first_byte_ms.append(first_byte)


def run_tts_engines_bench(
    engines: tuple[str, ...] = ENGINES,
    turns: int = TURNS,
    warmup: int = WARMUP,
    log: Callable[[str], None] = print,
) -> TtsBenchResults:
    started = time.perf_counter()
    results: list[EngineResult] = []
    with _served() as urls:
        saved = {name: os.environ.get(name) for name in _ENV}
        os.environ.update(
            {
                "ELEVENLABS_BASE_URL": urls["elevenlabs"],
                "ELEVENLABS_API_KEY": KEY,
                "OPENAI_BASE_URL": urls["openai"],
                "OPENAI_API_KEY": KEY,
            }
        )
        try:
            with tempfile.TemporaryDirectory() as folder:
                recording = _recording(Path(folder) / "reply.jsonl")
                for engine in engines:
                    result = EngineResult(engine)
                    log(f"tts bench: {engine} …")
                    anyio.run(_pipeline, engine, recording, result, turns, warmup)
                    if result.first_piece:
                        result.raw_ms = anyio.run(_raw, engine, urls, result.first_piece, turns)
                    results.append(result)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return TtsBenchResults(results, time.perf_counter() - started, turns, warmup)


_ENV = ("ELEVENLABS_BASE_URL", "ELEVENLABS_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY")


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
    else:
        for r in run_tts_engines_bench().results:
            print(
                r.engine,
                repr(r.first_piece),
                "raw",
                r.p50_p95(r.raw_ms),
                "pipeline",
                r.p50_p95(r.pipeline_ms),
                "added",
                r.p50_p95(r.added_ms()),
                "errors",
                r.errors[:2],
            )
