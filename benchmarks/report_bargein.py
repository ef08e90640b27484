"""The barge-in section of the benchmark report (``benchmarks.bench_bargein``)."""

from __future__ import annotations

from benchmarks.table import table
from voice_membrane.bench.bargein import CLIPS, BargeInRun
from voice_membrane.bench.echo_bargein import EchoRun
from voice_membrane.bench.stats import summarize

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


ECHO_TITLE = "Barge-in over the reply's own echo: the echo canceller"


_SETUPS = {
    "canceller": "WebRTC canceller",
    "headphones": "WebRTC canceller, no echo (headphones)",
    "level": "level judge, no canceller",
}


def echo_section(run: EchoRun) -> str:
    method = (
        "The reply's own audio heard back by the microphone, offline "
        "(`voice_membrane/bench/echo_bargein.py`): answers of three Piper sentences (the "
        "spoken question fixtures), played one after another into a room "
        "(`testing/echo_room.py`: the echo -20 or -10 dB under the reply, 20 to 200 ms "
        "late, with a small room's reverb, RT60 0.25 s) and heard through WebRTC's echo "
        "canceller (`listening/echo_canceller.py`, livekit's AEC3), Silero and the "
        'endpointer as `run --listen` chains them (`echo = "aec"`, no warm-up). '
        "*Self-interruptions*: pauses the echo alone made. *Pause latency*: a real "
        "person's recording (`real/read/go_forward.flac`) at 0 dB (the reply's level) "
        "spoken 0.5, 1.5 and 4 s into an answer, from the onset of its words (the first "
        "10 ms within 25 dB of its loudest) to the `PausePlayout`, dated by samples: the "
        "listening stages' own latency, without the device's (a speaker's 20-60 ms) or "
        "the processing time (the canceller costs 12 ms of CPU per second of audio). "
        "The same with no echo coming back (headphones: the canceller hands on the "
        "microphone's own audio once it hears none, `listening/echo_presence.py`), and "
        'the level judge without a canceller (`echo = "level"`, its 3 s warm-up). '
        f"The run took {run.seconds:.0f} s."
    )
    rows = [
        [f"{gain:+.0f} dB", f"{delay} ms", answers, pauses]
        for (gain, delay), (answers, pauses) in run.answers.items()
    ]
    own = table(["echo", "delay", "answers", "self-interruptions"], rows)
    rows = []
    for (name, at_s), values in run.latency.items():
        paused = [v for v in values if v is not None]
        rows.append(
            [
                _SETUPS[name],
                f"{at_s:g} s",
                f"{len(paused)} of {len(values)}",
                _spread(summarize(paused)),
            ]
        )
    latency = table(
        ["setup", "user speaks at", "paused", "onset → paused ms p50 / p95 / max"], rows
    )
    return f"## {ECHO_TITLE}\n\n{method}\n\n{own}\n\n{latency}"
