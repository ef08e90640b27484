"""Voice to voice: the shipped spoken fixtures heard in real time through the
real listening loop (``voice_membrane/bench/voice_run.py``); the method is
``sections/voice.md``. *Scripted*, at each ``[endpoint] end_silence_s`` tried:
the fakes, with the real detector and endpointer on the real audio; unless
``local=False``, *local-voice* at the shipped settings, and its preemptive
replies (``preemptive``).

``python -m benchmarks.voice [--no-local]`` runs it alone and prints it.
``VoiceResults`` stays in this module: saved results (``run --save``) name it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import anyio

from benchmarks.preemptive import PreemptRun, preemptive_table, run_preemptive_bench
from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario
from benchmarks.table import table
from voice_membrane.bench.stats import Spread
from voice_membrane.bench.voice_command import LOCAL_VOICE, NULL_SINK, with_endpoint
from voice_membrane.bench.voice_inputs import SPEECH, default_inputs, voice_inputs
from voice_membrane.bench.voice_run import VoiceRun, VoiceTarget, run_voice_target
from voice_membrane.bench.voice_scripted import scripted_voice_target
from voice_membrane.pipeline.config import load_pipeline

VOICE_TITLE = title("voice")
END_SILENCES = (0.4, 0.5, 0.6)
LOCAL_MAX_TOKENS = 40  # first audio needs the first sentence only; keeps the run short


@dataclass
class VoiceResults:
    scripted: dict[float, VoiceRun]  # by end_silence_s
    local: VoiceRun | None
    seconds: float
    preemptive: dict[bool, PreemptRun] | None = None


def run_voice_bench(
    *, local: bool = True, end_silences: tuple[float, ...] = END_SILENCES
) -> VoiceResults:
    started = time.perf_counter()
    inputs = default_inputs() + voice_inputs(
        [SPEECH / "mid_pause.wav", SPEECH / "two_utterances.wav"]
    )
    base = load_pipeline(LOCAL_VOICE)
    scripted: dict[float, VoiceRun] = {}
    for seconds in end_silences:
        with scripted_voice_target(inputs, with_endpoint(base, end_silence_s=seconds)) as target:
            scripted[seconds] = anyio.run(run_voice_target, target, inputs)
    run = preempt = None
    if local:
        config = base.with_overrides({"sink": NULL_SINK, "llm": {"max_tokens": LOCAL_MAX_TOKENS}})
        run = anyio.run(run_voice_target, VoiceTarget("local-voice", config), default_inputs())
        preempt = run_preemptive_bench()
    return VoiceResults(scripted, run, time.perf_counter() - started, preempt)


HEADERS = [
    "Setup",
    "files / turns",
    "split",
    "mean WER",
    "endpointing",
    "ended by",
    "final",
    "request",
    "first audio",
    "voice to voice",
    "added",
]


def _row(label: str, run: VoiceRun) -> list[object]:
    s, figures = run.summary(), run.figures()
    model = figures.get("turn_model_ms")  # the end-of-turn model's time per decision

    def ms(name: str) -> str:
        return Spread().cell(figures.get(name, []))

    return [
        label,
        f"{s['files']} / {s['turns']}",
        ", ".join(s["split"]) or "none",
        "—" if s["wer_mean"] is None else f"{s['wer_mean']:.2f}",
        ms("endpointing_ms"),
        run.ended_by() + (f" (model {Spread(('p50',)).cell(model)} ms p50)" if model else ""),
        ms("transcript_final_ms"),
        ms("request_ms"),
        ms("first_audio_ms"),
        ms("voice_to_voice_ms"),
        ms("stt_added_ms") if run.target.finalize_s is not None else "—",
    ]


def voice_section(results: VoiceResults) -> str:
    rows = [
        _row(f"scripted, end_silence_s {seconds}", run)
        for seconds, run in sorted(results.scripted.items())
    ]
    if results.local is not None:
        rows.append(_row("local-voice (shipped settings)", results.local))
    preemptive = results.preemptive
    return prose(
        "voice",
        seconds=results.seconds,
        table=table(HEADERS, rows),
        preemptive=""
        if preemptive is None
        else prose("voice#preemptive", table=preemptive_table(preemptive)),
    )


SCENARIO = Scenario("voice", (VOICE_TITLE,), run_voice_bench, lambda r: [voice_section(r)], True)


if __name__ == "__main__":
    print(voice_section(run_voice_bench(local="--no-local" not in sys.argv)))
