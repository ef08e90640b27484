"""Barge-in over the reply's own echo, replayed offline: the assistant's answers
(Piper speech) played into a room (``testing/echo_room.py``: a gain, a delay,
reverb) that the microphone hears, through the echo canceller (or not), the
detector and the endpointer, as ``run --listen`` chains them. Dated by samples,
as the endpointer is: a pause's latency here is the listening stages' own
(the user's speech onset → the ``PausePlayout``'s sample), with no device
latency and no processing time (docs/listening.md says what those add).

Two questions: does the answer's echo alone ever pause it (a
self-interruption), and how soon does a user who speaks over it pause it?
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf  # type: ignore[import-untyped]

from ..listening.decisions import Decision, PausePlayout
from ..listening.echo_canceller import EchoCanceller
from ..listening.endpointer import Endpointer
from ..listening.engines import make_vad
from ..listening.settings import EndpointSettings, VadSettings
from ..testing.echo_room import echo_path, mix, room_reverb, speech_onset
from ..vocab.audio import Samples

RATE = 16_000
FRAME = RATE // 50  # the microphone's 20 ms frames
QUESTIONS = Path(__file__).resolve().parents[2] / "audio_fixtures" / "speech" / "questions"
GAP_S = 1.0  # between answers: the user's turn
PATHS = [(gain, delay) for gain in (-20.0, -10.0) for delay in (20, 60, 120, 200)]


def answers(count: int, sentences: int = 3) -> list[Samples]:
    """``count`` answers of ``sentences`` Piper sentences each (the spoken
    question fixtures, taken in turn: no two answers alike)."""
    clips = [sf.read(p, dtype="int16")[0] for p in sorted(QUESTIONS.glob("*.wav"))]
    return [
        np.concatenate([clips[(i * sentences + k) % len(clips)] for k in range(sentences)])
        for i in range(count)
    ]


@dataclass
class Heard:
    """What the endpointer decided over one session of answers."""

    pauses: list[int] = field(default_factory=list)  # PausePlayout samples
    answers: list[tuple[int, int]] = field(default_factory=list)  # (start, end) samples

    def paused_in(self, start: int, end: int) -> list[int]:
        return [at for at in self.pauses if start <= at < end]


def session(
    replies: list[Samples],
    gain_db: float,
    delay_ms: float,
    canceller: EchoCanceller | None,
    settings: EndpointSettings,
    user: tuple[Samples, int, int] | None = None,
    reverb: bool = True,
) -> Heard:
    """The answers played one after another (``GAP_S`` apart, 1 s of silence
    first) and heard back; ``user``: (voice, answer index, samples into it)."""
    played, heard = timeline(replies)
    mic = echo_path(played, gain_db, delay_ms, room_reverb() if reverb else None)
    if user is not None:
        voice, index, into = user
        mic = mix(mic, voice, heard.answers[index][0] + into)
    vad = make_vad(VadSettings(already_talking="user"), RATE)
    endpointer = Endpointer(settings, RATE)
    speaking = dict.fromkeys((s for s, _ in heard.answers), True)
    speaking.update(dict.fromkeys((e for _, e in heard.answers), False))
    cleaned_at = 0  # samples the detector has been fed
    for at in range(0, len(mic) - FRAME + 1, FRAME):
        end = at + FRAME
        for edge in [s for s in speaking if at <= s < end]:
            _note(heard, endpointer.assistant_speaking(speaking.pop(edge), edge))
        frame = mic[at:end]
        if canceller is not None:
            canceller.far(played[at:end], RATE, _ns(at))
            frame = canceller.near(frame, _ns(end))
        cleaned_at += len(frame)
        for event in vad.feed(frame):
            _note(heard, endpointer.vad(event))
        _note(heard, endpointer.advance(cleaned_at))
    return heard


def onset_latency_ms(heard: Heard, voice: Samples, index: int, into: int) -> float | None:
    """From the user's speech onset to the pause (None: never paused)."""
    onset = heard.answers[index][0] + into + speech_onset(voice)
    later = [at for at in heard.pauses if at >= onset - RATE // 10]
    return None if not later else (later[0] - onset) * 1000 / RATE


def timeline(replies: list[Samples]) -> tuple[Samples, Heard]:
    pieces: list[Samples] = [np.zeros(RATE, dtype=np.int16)]
    heard, at = Heard(), RATE
    for reply in replies:
        heard.answers.append((at, at + len(reply)))
        pieces += [reply, np.zeros(round(GAP_S * RATE), dtype=np.int16)]
        at += len(reply) + round(GAP_S * RATE)
    return np.concatenate(pieces), heard


def _ns(sample: int) -> int:
    return sample * 1_000_000_000 // RATE


def _note(heard: Heard, decisions: list[Decision]) -> None:
    heard.pauses += [d.at_sample for d in decisions if isinstance(d, PausePlayout)]


POSITIONS_S = (0.5, 1.5, 4.0)  # the user speaks this far into the answer
NO_ECHO_DB = -120.0  # headphones: the echo's gain (under one int16 step: none)


@dataclass
class EchoRun:
    """Per echo path (gain dB, delay ms): the answers heard over their echo
    and the pauses they made; per setup ("canceller": WebRTC, no warm-up;
    "level": today's level judge with its 3 s warm-up, no canceller) and
    position, the user's pause latencies (ms; None: never paused)."""

    answers: dict[tuple[float, int], tuple[int, int]] = field(default_factory=dict)
    # setups: "canceller", "level", and "headphones" (the canceller where no echo
    # comes back: as many trials as the others, each with its own answers)
    latency: dict[tuple[str, float], list[float | None]] = field(default_factory=dict)
    seconds: float = 0.0


def run_echo(answers_per_path: int, users_per_path: int) -> EchoRun:
    """Self-interruptions per echo path; a user's pause latency per setup and position."""
    from ..listening.aec_webrtc import webrtc_canceller
    from ..testing.echo_room import user_voice

    started = time.perf_counter()
    run = EchoRun()
    cancelled = EndpointSettings(echo="aec", echo_warmup_s=0.0)
    pool = answers(max(answers_per_path, len(PATHS) * users_per_path + 1))

    def user_over(k: int, gain: float, delay: int, name: str, settings: EndpointSettings) -> None:
        """The user over answer ``k`` at each position, with a fresh canceller (or none)."""
        replies = pool[k : k + 2]
        voice = user_voice(0.0, replies[0])
        for at_s in POSITIONS_S:
            canceller = None if name == "level" else webrtc_canceller(RATE)
            into = round(at_s * RATE)
            heard = session(replies, gain, delay, canceller, settings, (voice, 0, into))
            run.latency.setdefault((name, at_s), []).append(onset_latency_ms(heard, voice, 0, into))

    for gain, delay in PATHS:
        heard = session(pool[:answers_per_path], gain, delay, webrtc_canceller(RATE), cancelled)
        pauses = sum(len(heard.paused_in(s, e)) for s, e in heard.answers)
        run.answers[(gain, delay)] = (len(heard.answers), pauses)
        for k in range(users_per_path):
            user_over(k, gain, delay, "canceller", cancelled)
            user_over(k, gain, delay, "level", EndpointSettings())
    # headphones: nothing comes back, so one path; as many trials, each its own answers
    for k in range(len(PATHS) * users_per_path):
        user_over(k, NO_ECHO_DB, 0, "headphones", cancelled)
    run.seconds = time.perf_counter() - started
    return run
