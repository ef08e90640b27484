"""Turn-taking on the corpus (``audio_fixtures/turns/manifest.json``): when the
listener decides the user is done, against when they were (the method:
``sections/turns.md``). The listener decides by samples, so with the spans' own
words as the recogniser a file is fed as fast as the listener takes it, one
20 ms frame at a time (played in real time, the same turns came up to a frame
sooner); with whisper, whose final comes when it has decoded, in real time.

``python -m benchmarks.turns [--whisper] [FILE…]`` runs it alone (on these
files of the manifest; whisper: the real-time run too) and prints the section.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario
from benchmarks.table import table
from voice_membrane.bench.stats import Spread
from voice_membrane.bench.voice_command import LOCAL_VOICE
from voice_membrane.pipeline.config import ConfigError, PipelineConfig, load_pipeline
from voice_membrane.pipeline.listen_build import listener_for, stt_for
from voice_membrane.pipeline.listening import Listener, ListenItem, UserTurn
from voice_membrane.sources.base import Frame
from voice_membrane.sources.wav_file import WavFileSource
from voice_membrane.stt.base import SttEngine
from voice_membrane.testing.span_stt import SpanStt

FIXTURES = Path(__file__).resolve().parent.parent / "audio_fixtures"
MANIFEST = FIXTURES / "turns" / "manifest.json"
LEAD_S, TAIL_S = 0.5, 3.5
LONG_PAUSE_S = 1.2  # the pauses the model must wait through ("[1.2 s]" in the issue)

# (label, [endpoint] changes over local-voice's)
SETUPS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("fixed silence 0.6 s + transcript shape", {"turn_model": "none"}),
    ("smart-turn + transcript shape", {"turn_model": "smart-turn"}),
    ("smart-turn alone", {"turn_model": "smart-turn", "transcript_shape": False}),
)
# The real-time run with whisper: the first and the second setup, on the
# shipped questions and these of the shipped voice's paused utterances.
WHISPER_SETUPS = (0, 1)
WHISPER_PAUSED = (
    "speech/mid_pause.wav",
    "turns/book_table_um.flac",
    "turns/remind_dentist.flac",
    "turns/weather_uh.flac",
    "turns/beatles.flac",
    "turns/reset_password.flac",
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One file of the manifest (seconds in the file)."""

    file: str
    text: str
    kind: str
    source: str
    duration_s: float
    spans: tuple[tuple[float, float, str], ...]
    end_s: float
    pauses: tuple[tuple[float, float], ...]

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Entry:
        plain = {name: raw[name] for name in ("file", "text", "kind", "source", "duration_s")}
        spans, pauses = (tuple(map(tuple, raw[name])) for name in ("spans", "pauses"))
        return cls(**plain, spans=spans, end_s=raw["end_s"], pauses=pauses)

    @property
    def longest_pause_s(self) -> float:
        return max((b - a for a, b in self.pauses), default=0.0)


def load_manifest() -> list[Entry]:
    return [Entry.of(raw) for raw in json.loads(MANIFEST.read_text(encoding="utf-8"))]


@dataclass(slots=True)
class Heard:
    """One file through one setup: each turn's (decision sample less the true end, ms;
    its reason; the model's own time), in order."""

    entry: Entry
    turns: list[tuple[float, str, float | None]] = field(default_factory=list)
    # the last words made a turn (with the spans' words: every span's were
    # given; with a recogniser: a turn came after the true end)
    end_heard: bool = False

    @property
    def cut(self) -> bool:
        """A turn was decided before the user was done."""
        return bool(self.turns) and self.turns[0][0] < 0

    @property
    def delay_ms(self) -> float | None:
        """From the true end to the turn that followed it."""
        return next((ms for ms, _, _ in self.turns if ms >= 0), None)


@dataclass(slots=True)
class SetupRun:
    label: str
    stt: str
    heard: list[Heard] = field(default_factory=list)
    seconds: float = 0.0


def config_for(changes: dict[str, Any], base: PipelineConfig | None = None) -> PipelineConfig:
    base = base or load_pipeline(LOCAL_VOICE)
    return base.model_copy(update={"endpoint": base.endpoint.model_copy(update=changes)})


async def _one_at_a_time(listener: Listener, frames: AsyncIterator[Frame]) -> AsyncIterator[Frame]:
    """``frames``, each once the listener has heard the one before: none are
    heard together, so a decision's sample count is its frame's end."""
    async for frame in frames:
        tries = 0
        while listener.vad.samples_fed < frame.position:
            # (a few turns of the loop, then 1 ms naps: the model's thread needs the core)
            await anyio.sleep(0 if tries < 20 else 0.001)
            tries += 1
        yield frame


async def hear(
    entry: Entry, config: PipelineConfig, stt: SttEngine | None, realtime: bool = False
) -> Heard:
    """``entry`` through a fresh listener; ``stt``: a started engine (None: its spans)."""
    rate = 16_000
    lead = round(LEAD_S * rate)
    spans = SpanStt([(lead + round(a * rate), text) for a, _, text in entry.spans], rate)
    listener = listener_for(config, stt or spans, recording=True)
    spans.clock = lambda: listener.vad.samples_fed
    true_end = lead + round(entry.end_s * rate)
    heard = Heard(entry)
    times = {"lead_silence_s": LEAD_S, "tail_silence_s": TAIL_S}
    source = WavFileSource(FIXTURES / entry.file, rate=rate, realtime=realtime, **times)
    send, receive = anyio.create_memory_object_stream[ListenItem](0)
    async with source, anyio.create_task_group() as tg:
        tg.start_soon(listener.run, _one_at_a_time(listener, source.frames()), send)
        async with receive:
            async for item in receive:
                if isinstance(item, UserTurn):
                    ms = (listener.vad.samples_fed - true_end) * 1000 / rate
                    heard.turns.append((ms, item.reason, item.turn_model_ms))
                    if ms >= 0:  # the user was done: the rest is silence
                        break
        tg.cancel_scope.cancel()
    heard.end_heard = heard.delay_ms is not None and (stt is not None or spans.all_said)
    return heard


async def _setup_run(
    label: str, changes: dict[str, Any], entries: Sequence[Entry], stt: SttEngine | None
) -> SetupRun:
    """One setup over ``entries``: by their spans' words, or ``stt`` in real time."""
    run, began = SetupRun(label, "the spans' words"), time.perf_counter()
    if stt is not None:
        run.stt = f"{stt.name} (real time)"
    config = config_for(changes)
    for entry in entries:
        run.heard.append(await hear(entry, config, stt, realtime=stt is not None))
    run.seconds = time.perf_counter() - began
    return run


async def _run(files: Sequence[str] | None, whisper: bool) -> list[SetupRun]:
    entries = [e for e in load_manifest() if files is None or e.file in files]
    runs = [await _setup_run(label, changes, entries, None) for label, changes in SETUPS]
    if not whisper:
        return runs
    chosen = [
        e for e in entries if e.file.startswith("speech/questions/") or e.file in WHISPER_PAUSED
    ]
    stt = stt_for(load_pipeline(LOCAL_VOICE))
    await stt.start()
    try:
        await hear(chosen[0], config_for({}), stt, realtime=True)  # warm-up, not counted
        for index in WHISPER_SETUPS:
            runs.append(await _setup_run(*SETUPS[index], chosen, stt))
    finally:
        await stt.aclose()
    return runs


def run_turns_bench(files: Sequence[str] | None = None, whisper: bool = True) -> list[SetupRun]:
    """Every setup over the corpus (``files``: only these, by their manifest
    path); ``whisper``: the real-time run with the default recogniser too."""
    return anyio.run(_run, files, whisper)


TURNS_TITLE = title("turns")
HEADERS = [
    "Setup",
    "recogniser",
    "complete turns",
    "delay p50 / p95, ms",
    "cut",
    "with thinking pauses",
    "cut",
    f"cut, pauses ≥ {LONG_PAUSE_S} s",
    "split",
    "end unheard",
    "end reasons",
    "model ms p50 / max",
    "run, s",
]


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole}" if whole else "—"


def _kind(run: SetupRun, kind: str) -> list[Heard]:
    return [h for h in run.heard if h.entry.kind == kind]


def row(run: SetupRun) -> list[object]:
    complete, paused = _kind(run, "complete"), _kind(run, "thinking_pause")
    long = [h for h in paused if h.entry.longest_pause_s >= LONG_PAUSE_S]
    reasons = Counter(reason for h in run.heard for _, reason, _ in h.turns)
    model = [ms for h in run.heard for _, _, ms in h.turns if ms is not None]
    return [
        run.label,
        run.stt,
        len(complete),
        Spread().cell([d for h in complete if (d := h.delay_ms) is not None]),
        _share(sum(h.cut for h in complete), len(complete)),
        len(paused),
        _share(sum(h.cut for h in paused), len(paused)),
        _share(sum(h.cut for h in long), len(long)),
        sum(len(h.turns) > 1 for h in run.heard),
        sum(not h.end_heard for h in run.heard),
        ", ".join(f"{r} {n}" for r, n in reasons.most_common()),
        Spread(("median", "max")).cell(model),
        f"{run.seconds:.0f}",
    ]


def cut_files(runs: Sequence[SetupRun]) -> str:
    """Which thinking-pause files each setup cut (the table's counts, named)."""
    lines = []
    for run in runs:
        names = [h.entry.file.rsplit("/", 1)[-1] for h in _kind(run, "thinking_pause") if h.cut]
        if names:
            lines.append(f"- {run.label}, {run.stt}: {', '.join(f'`{n}`' for n in names)}")
    return "\n".join(lines) or "- none"


def turns_section(runs: Sequence[SetupRun]) -> str:
    rows = table(HEADERS, [row(run) for run in runs])
    return prose("turns", lead_s=LEAD_S, tail_s=TAIL_S, table=rows, cut_files=cut_files(runs))


SCENARIO = Scenario(
    "turns",
    (TURNS_TITLE,),
    run_turns_bench,
    lambda r: [turns_section(r)],
    True,
    (ImportError, ConfigError),  # ConfigError: no end-of-turn model
)

if __name__ == "__main__":
    files = [a for a in sys.argv[1:] if a != "--whisper"] or None
    print(turns_section(run_turns_bench(files, "--whisper" in sys.argv)))
