"""The voice-to-voice section of the benchmark report: the results
``benchmarks.bench_voice`` fills, and their rendering."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.bench_preemptive import PreemptRun, preemptive_section
from benchmarks.table import table
from voice_membrane.bench.voice_run import VoiceRun

VOICE_TITLE = "Voice to voice: end of the user's speech → the reply's first audio"


@dataclass
class VoiceResults:
    scripted: dict[float, VoiceRun]  # by end_silence_s
    local: VoiceRun | None
    seconds: float
    preemptive: dict[bool, PreemptRun] | None = None


def _p50(run: VoiceRun, name: str) -> str:
    row = run.summary()["figures_ms"].get(name)
    return "—" if row is None else f"{row['p50']:.0f} / {row['p95']:.0f}"


def _ended_by(run: VoiceRun) -> str:
    """Why the turns ended, and the end-of-turn model's time per decision (p50) if asked."""
    model = run.summary()["figures_ms"].get("turn_model_ms")
    return run.ended_by() + ("" if model is None else f" (model {model['p50']:.0f} ms p50)")


def _row(label: str, run: VoiceRun) -> list[object]:
    s = run.summary()
    split = ", ".join(s["split"]) or "none"
    wer = "—" if s["wer_mean"] is None else f"{s['wer_mean']:.2f}"
    return [
        label,
        f"{s['files']} / {s['turns']}",
        split,
        wer,
        _p50(run, "endpointing_ms"),
        _ended_by(run),
        _p50(run, "transcript_final_ms"),
        _p50(run, "request_ms"),
        _p50(run, "first_audio_ms"),
        _p50(run, "voice_to_voice_ms"),
        _p50(run, "stt_added_ms") if run.target.finalize_s is not None else "—",
    ]


def voice_section(results: VoiceResults) -> str:
    method = (
        "Each file of `audio_fixtures/speech/` played in real time (`WavFileSource`, "
        "`realtime=True`) into `converse` — the loop `run --input` uses — one session per "
        "row, the history cleared before each file. Milliseconds after the end of the "
        "user's speech (p50 / p95): *endpointing* until the turn was decided (*ended by*: "
        "why, turns by `endpoint_reason`, and the end-of-turn model's own time per "
        "decision when it was asked), *final* the "
        "last final transcript, *request* the LLM request; *first audio* is after the request; "
        "*voice to voice* = request + first audio. *Scripted*: the fake Deepgram (finalize "
        "answered after 150 ms, the fixture's text as transcript), fake LLM and TTS, with the "
        "real silero detector and endpointer; *added* is the STT's finalize → final less "
        "the fake's 150 ms (target ≤ 5 ms). *Split*: files heard as another number of turns "
        "than they hold (`mid_pause.wav` is 1, `two_utterances.wav` 2). *local-voice*: "
        "whisper tiny.en → SmolLM2 → Piper on the 8 Piper questions at the shipped settings, "
        "into a null sink that is not real time, so no reply is held (preemptive replies "
        "are measured below, on a real-time sink), "
        "after one warm-up turn. "
        "In the scripted rows a split of `two_utterances.wav` is the fake's doing, not the "
        "endpointer's: the fake answers each STT stream with the next script in its queue, "
        "and the pause in `mid_pause.wav` opens a second stream, so the scripts after it are "
        "one file late (with the real recognizer, tests/test_voice_loop.py hears "
        f"`two_utterances.wav` as two turns). The run took {results.seconds:.0f} s."
    )
    headers = [
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
    rows = [
        _row(f"scripted, end_silence_s {seconds}", run)
        for seconds, run in sorted(results.scripted.items())
    ]
    if results.local is not None:
        rows.append(_row("local-voice (shipped settings)", results.local))
    parts = [f"## {VOICE_TITLE}", method, table(headers, rows)]
    if results.preemptive is not None:
        parts += [
            "### Preemptive replies (local-voice, real-time null sink)",
            "The 8 Piper questions and `mid_pause.wav`, `[endpoint] preemptive` on and off "
            "(`benchmarks/bench_preemptive.py`): p50 / p95 ms after the end of speech. "
            "*Held and kept*: turns whose reply began at the tentative end and was heard; "
            "*thrown away*: held replies the user never heard (the user went on), with the "
            "LLM deltas they cost.",
            preemptive_section(results.preemptive),
        ]
    return "\n\n".join(parts)
