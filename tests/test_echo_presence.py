"""Whether the reply comes back into the microphone (listening/echo_presence.py):
over a speaker it does, in headphones it does not, and a user talking over the
reply never makes a speaker's echo look absent. Real audio: Piper answers,
a small room's echo (testing/echo_room.py), a real person's voice."""

from __future__ import annotations

import numpy as np

from voice_membrane.bench.echo_bargein import RATE, answers
from voice_membrane.listening.echo_presence import EchoPresence
from voice_membrane.testing.echo_room import echo_path, mix, room_reverb, user_voice
from voice_membrane.vocab.audio import Samples

BLOCK = RATE // 100


def _noise(n: int, level_dbfs: float = -60.0, seed: int = 3) -> Samples:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * 32768 * 10 ** (level_dbfs / 20)).astype(np.int16)


def _room(far: Samples, gain_db: float, delay_ms: int) -> Samples:
    """A speaker's echo of ``far`` and the microphone's own noise."""
    echo = echo_path(far, gain_db, delay_ms, room_reverb()).astype(np.int32)
    return np.clip(echo + _noise(len(far)), -32768, 32767).astype(np.int16)


def _judged(far: Samples, near: Samples) -> list[bool]:
    """The presence after each block."""
    presence = EchoPresence()
    return [
        presence.feed(far[i : i + BLOCK], near[i : i + BLOCK])
        for i in range(0, min(len(far), len(near)) - BLOCK + 1, BLOCK)
    ]


def _reply() -> Samples:
    return np.concatenate([np.zeros(RATE, dtype=np.int16), *answers(2)])


def test_a_speakers_echo_is_heard_all_along() -> None:
    far = _reply()
    for gain_db, delay_ms in [(-20.0, 20), (-10.0, 200), (-30.0, 120)]:
        assert all(_judged(far, _room(far, gain_db, delay_ms)))


def test_headphones_are_found_within_the_first_answer() -> None:
    far = _reply()
    judged = _judged(far, _noise(len(far)))
    first_no = judged.index(False)
    assert first_no < 100 + 150  # (blocks: 1 s of silence, then 1.5 s of the answer)
    assert not any(judged[first_no:])


def test_a_user_over_a_speakers_reply_never_makes_its_echo_look_absent() -> None:
    """Double talk: the near is their voice (0 dB, the reply's level) more than
    the echo, so loudness follows the reply less; the echo is still there."""
    far = _reply()
    voice = user_voice(0.0, far[RATE:])
    for into in (RATE + RATE // 2, 3 * RATE, 5 * RATE):
        near = mix(_room(far, -20.0, 60), voice, into)
        assert all(_judged(far, near))


def test_an_echo_that_comes_later_is_heard_again() -> None:
    """Headphones taken off mid-session: the speaker's echo turns it back on."""
    far = np.concatenate([_reply(), _reply()[RATE:]])
    half = len(_reply())
    near = _room(far, -20.0, 60)
    near[:half] = _noise(half)
    judged = _judged(far, near)
    assert not judged[half // BLOCK - 1]
    assert all(judged[half // BLOCK + 250 :])  # (2.5 s: the window holds the headphones)
