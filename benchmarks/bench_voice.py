"""Voice to voice: the shipped spoken fixtures heard through the real listening
loop (``voice_membrane/bench/voice_run.py``), played in real time.

- *scripted*, at each ``[endpoint] end_silence_s`` tried: the fake Deepgram
  (fixed 150 ms finalize), fake LLM and TTS; the silero detector and the
  endpointer are the real ones on the real audio, and the transcript is the
  fixture's text, so whether a fixture's turn is split (``mid_pause.wav`` must
  stay 1 turn, ``two_utterances.wav`` 2) and the endpointing are what the
  settings give, and "our code over the fake's finalize" is what we add;
- *local-voice* (whisper tiny.en → SmolLM2 → Piper) on the Piper questions, at the
  shipped settings, unless ``local=False`` (its null sink is not real time, so it
  cannot hold a reply: no preemptive start);
- *preemptive replies* (``bench_preemptive``): local-voice with a real-time null
  sink, ``[endpoint] preemptive`` on and off, unless ``local=False``.

``python -m benchmarks.bench_voice [--no-local]`` runs it alone and prints it.
"""

from __future__ import annotations

import sys
import time

import anyio

from benchmarks.bench_preemptive import run_preemptive_bench
from benchmarks.report_voice import VOICE_TITLE, VoiceResults, voice_section
from benchmarks.scenario import Scenario
from voice_membrane.bench.voice_command import LOCAL_VOICE, NULL_SINK, with_endpoint
from voice_membrane.bench.voice_inputs import SPEECH, VoiceInput, default_inputs, voice_inputs
from voice_membrane.bench.voice_run import VoiceRun, VoiceTarget, run_voice_target
from voice_membrane.bench.voice_scripted import scripted_voice_target
from voice_membrane.pipeline.config import load_pipeline

END_SILENCES = (0.4, 0.5, 0.6)
LOCAL_MAX_TOKENS = 40  # first audio needs the first sentence only; keeps the run short


def _inputs() -> list[VoiceInput]:
    return default_inputs() + voice_inputs(
        [SPEECH / "mid_pause.wav", SPEECH / "two_utterances.wav"]
    )


def run_voice_bench(
    *, local: bool = True, end_silences: tuple[float, ...] = END_SILENCES
) -> VoiceResults:
    started = time.perf_counter()
    inputs = _inputs()
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


SCENARIO = Scenario("voice", (VOICE_TITLE,), run_voice_bench, lambda r: [voice_section(r)], True)


if __name__ == "__main__":
    print(voice_section(run_voice_bench(local="--no-local" not in sys.argv)))
