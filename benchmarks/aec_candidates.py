"""Echo cancellers tried for issue 44 (docs/listening.md, "Echo cancellation"),
measured on our audio: a reply spoken by Piper fed back into the microphone at
-20 and -10 dB, delayed 20 to 200 ms, with and without a little room reverb,
and a user at 0 dB over it.

Not part of ``make bench`` (``benchmarks/run.py`` does not import it): two of
the candidates are not installed by the setup. To rerun::

    pip install --target /tmp/aec-aap aec-audio-processing   # builds from source (~9 min)
    pip install --target /tmp/aec-speex speexdsp   # needs swig and libspeexdsp-dev
    PYTHONPATH=.:/tmp/aec-aap:/tmp/aec-speex python -m benchmarks.aec_candidates
    python -m benchmarks.aec_candidates --words [GAIN_DB ...]   # the words kept

Per candidate and echo path: ERLE (echo return loss enhancement: the echo's
level in, over its level out: in the first 0.5 s, how soon it works, and past
the first 2 s), the user's speech kept (the
output's level where the user speaks, over the user's own level there: 0 dB is
all of it) and the CPU time per second of audio. All 10 ms frames at 16 kHz.
``--words``: how many questions said over the reply whisper still hears through
the shipped canceller, its reference at each gain (``aec_webrtc.FAR_GAIN``).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from voice_membrane.bench.bargein import REPLY
from voice_membrane.testing.echo_room import echo_path, mix, room_reverb, user_voice
from voice_membrane.vocab.audio import Samples

RATE = 16_000
FRAME = RATE // 100
CACHE = Path("/tmp/aec_reply.npy")
Canceller = Callable[[Samples, Samples], Samples]  # (far, near) per 10 ms -> near cleaned


def piper_reply() -> Samples:
    """The bench's long reply spoken by Piper, at 16 kHz (cached in /tmp)."""
    if CACHE.exists():
        return np.asarray(np.load(CACHE), dtype=np.int16)
    import anyio

    from voice_membrane.tts.piper import PiperEngine
    from voice_membrane.vocab.audio import resample

    async def speak() -> Samples:
        engine = PiperEngine()
        await engine.start()
        pieces = [c.samples async for c in engine.synthesize(REPLY)]
        return resample(np.concatenate(pieces), engine.sample_rate, RATE)

    samples = anyio.run(speak)
    np.save(CACHE, samples)
    return samples


def webrtc_livekit() -> Canceller:
    from livekit import rtc

    apm = rtc.AudioProcessingModule(echo_cancellation=True)

    def step(far: Samples, near: Samples) -> Samples:
        apm.process_reverse_stream(rtc.AudioFrame(bytearray(far.tobytes()), RATE, 1, FRAME))
        frame = rtc.AudioFrame(bytearray(near.tobytes()), RATE, 1, FRAME)
        apm.process_stream(frame)
        return np.frombuffer(bytes(frame.data), dtype=np.int16)

    return step


def shipped() -> Canceller:
    """livekit's module as shipped (aec_webrtc.py), its reference at ``FAR_GAIN``."""
    from voice_membrane.listening.aec_webrtc import WebRtcEcho

    return WebRtcEcho(RATE).process


def webrtc_aap() -> Canceller:
    from aec_audio_processing import AudioProcessor

    ap = AudioProcessor(enable_aec=True, enable_ns=False, enable_agc=False, enable_vad=False)
    ap.set_stream_format(RATE, 1, RATE, 1)
    ap.set_reverse_stream_format(RATE, 1)

    def step(far: Samples, near: Samples) -> Samples:
        ap.process_reverse_stream(far.tobytes())
        return np.frombuffer(ap.process_stream(near.tobytes()), dtype=np.int16)

    return step


def speex() -> Canceller:
    from speexdsp import EchoCanceller

    ec = EchoCanceller.create(FRAME, 4096, RATE)  # a 256 ms filter: covers 200 ms

    def step(far: Samples, near: Samples) -> Samples:
        return np.frombuffer(ec.process(near.tobytes(), far.tobytes()), dtype=np.int16)

    return step


CANDIDATES = {
    "livekit": ("livekit", webrtc_livekit),
    "aec-audio-processing": ("aec_audio_processing", webrtc_aap),
    "speexdsp": ("speexdsp", speex),
}


def run(make: Callable[[], Canceller], far: Samples, near: Samples) -> tuple[Samples, float]:
    step = make()
    n = len(near) // FRAME
    out = np.zeros(n * FRAME, dtype=np.int16)
    cpu = time.process_time()
    for i in range(n):
        s = slice(i * FRAME, (i + 1) * FRAME)
        out[s] = step(far[s], near[s])
    return out, (time.process_time() - cpu) / (n * FRAME / RATE)


def power_db(x: Samples) -> float:
    return float(10 * np.log10(np.mean(x.astype(np.float64) ** 2) + 1e-9))


def measure(name: str, reply: Samples) -> list[str]:
    module, make = CANDIDATES[name]
    if importlib.util.find_spec(module) is None:
        return [f"| {name} | not installed | | | | |"]
    rows = []
    user, at = user_voice(0.0, reply), 8 * RATE
    for gain in (-20.0, -10.0):
        for delay_ms in (20, 60, 120, 200):
            for reverb in (False, True):
                echo = echo_path(reply, gain, delay_ms, room_reverb() if reverb else None)
                out, cpu = run(make, reply, echo)
                erle = power_db(echo[2 * RATE : len(out)]) - power_db(out[2 * RATE :])
                first = power_db(echo[: RATE // 2]) - power_db(out[: RATE // 2])
                span = slice(at, at + len(user))
                out2, _ = run(make, reply, mix(echo, user, at))
                kept = power_db(out2[span]) - power_db(user)
                path = f"{gain:+.0f} dB, {delay_ms} ms{', reverb' if reverb else ''}"
                numbers = f"{first:.1f} | {erle:.1f} | {kept:+.1f} | {cpu * 1000:.1f}"
                rows.append(f"| {name} | {path} | {numbers} |")
    return rows


QUESTIONS = Path(__file__).resolve().parent.parent / "audio_fixtures" / "speech" / "questions"
KEY_WORDS = {  # a question fixture, and the word that shows whisper heard it
    "what_time": "what time",
    "call_mom": "mother",
    "two_plus_two": "plus",
    "weather_paris": "paris",
    "capital_france": "france",
}


def words_kept(gains_db: list[float]) -> None:
    """Whisper on five questions said 1.5 and 4 s into the reply, over no echo
    and a -20 / -10 dB one (60 ms, reverb), through the shipped canceller with
    its reference at each of ``gains_db`` ("raw": uncancelled): how many of 10
    it still heard."""
    import anyio
    import soundfile as sf  # type: ignore[import-untyped]

    import voice_membrane.listening.aec_webrtc as shipped_module
    from voice_membrane.stt.registry import create_stt
    from voice_membrane.testing.stt_drive import drive

    reply = piper_reply()
    clips = {n: sf.read(QUESTIONS / f"{n}.wav", dtype="int16")[0] for n in KEY_WORDS}

    async def heard(engine: Any, gain: float | None, echo_db: float | None) -> int:
        kept = 0
        for at_s in (1.5, 4.0):
            for name, clip in clips.items():
                at = round(at_s * RATE)
                base = np.zeros(len(reply), np.int16)
                if echo_db is not None:
                    base = echo_path(reply, echo_db, 60, room_reverb())
                near = mix(base, clip, at)
                if gain is not None:
                    shipped_module.FAR_GAIN = 10 ** (gain / 20)
                    near = run(shipped, reply, near)[0]
                text = (await drive(engine, near[at - RATE // 4 : at + len(clip)])).text
                kept += KEY_WORDS[name] in text.lower()
        return kept

    async def measure() -> None:
        engine = create_stt("whisper")
        await engine.start()
        for gain in [None, *gains_db]:
            counts = [await heard(engine, gain, echo) for echo in (None, -20.0, -10.0)]
            label = "uncancelled" if gain is None else f"reference {gain:+.0f} dB"
            print(f"| {label} | {' | '.join(str(c) for c in counts)} |", flush=True)
        await engine.aclose()

    print("| whisper heard, of 10 | no echo | echo -20 dB | echo -10 dB |")
    print("| --- | --- | --- | --- |")
    anyio.run(measure)


def main(names: list[str]) -> None:
    reply = piper_reply()
    print(f"reply: {len(reply) / RATE:.1f} s of Piper speech")
    print("| canceller | echo path | ERLE first 0.5 s | ERLE after 2 s | user kept dB | CPU ms/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in names or list(CANDIDATES):
        for row in measure(name, reply):
            print(row, flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--words"]:
        words_kept([float(g) for g in sys.argv[2:]] or [0.0, -10.0, -20.0])
    else:
        main(sys.argv[1:])
