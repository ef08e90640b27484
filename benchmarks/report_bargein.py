"""The barge-in section of the benchmark report (``benchmarks.bench_bargein``)."""

from __future__ import annotations

from benchmarks.markdown import table
from voice_membrane.bench.bargein import CLIPS, BargeInRun

BARGEIN_TITLE = "Barge-in by voice: speech over the reply → its audio paused"


def _spread(row: dict[str, float] | None) -> str:
    return "—" if row is None else f"{row['p50']:.0f} / {row['p95']:.0f} / {row['max']:.0f}"


def bargein_section(run: BargeInRun) -> str:
    s = run.summary()
    method = (
        "A live user (`voice_membrane/bench/bargein.py`) holds a spoken conversation in "
        "real time through the real loop (`converse`: Silero, the endpointer, pocketsphinx; "
        "the reply a long recording spoken by espeak-ng into the real-time null sink, "
        '`echo = "aec"`): a question, then each round, once the reply has played the '
        'echo warm-up (3 s) plus 0.2 to 1.0 s, "mm-hm" (the reply must pause and resume) and '
        '1.5 s later "stop" (it must pause and be interrupted; "stop" is then the next '
        "turn, spoken over in the next round). Milliseconds from the clip's speech onset "
        "(the start of its first 4 ms block above -50 dBFS, the detector's loudness gate on "
        "its own blocks, dated as a microphone captures it), p50 / p95 / "
        "max: *paused* when the reply's audio was paused (target ≤ 150 ms p95), *ended* when "
        "it resumed or was interrupted. The null sink has no output latency; a speaker adds "
        f"its own (20 to 60 ms through PulseAudio). The run took {s['seconds']:.0f} s; "
        f"rounds that found the reply over (skipped): {s['skipped']}."
    )
    headers = ["Said over the reply", "must", "trials", "as it must", "paused", "ended"]
    rows = []
    for clip in CLIPS:
        c = s[clip]
        rows.append(
            [
                f"`{clip}.wav`",
                c["expect"],
                c["trials"],
                c["right"],
                _spread(c["pause_ms"]),
                _spread(c["end_ms"]),
            ]
        )
    return f"## {BARGEIN_TITLE}\n\n{method}\n\n{table(headers, rows)}"
