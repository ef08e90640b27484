"""Make the turn-taking corpus: ``manifest.json`` beside this file, and the
utterances with thinking pauses (and their fluent twins) as 16 kHz mono FLAC.

    PYTHONPATH=. .venv/bin/python audio_fixtures/turns/make_turns.py

Each synthesized file is said by one of the project's voices (Piper's joe,
noise off, and espeak-ng voices, through ``scripts/make_speech_fixtures.py``'s
``Voices``) as one sentence, a comma where each pause goes (the voice keeps a
continuing intonation there, as a speaker who stops mid-thought does, and not a
sentence's falling end, as pieces said alone would have); the comma's own short
silence (the longest quiet gaps, 0.14-0.33 s) is then replaced by the pause's
digital silence, so the pauses are exactly the silences put in. Fillers ("um",
"uh"), which the voices say in a sentence in 0.1-0.2 s (too short for the
detector to count as speech), are said alone at 0.6 of the voice's rate and
put in their place.
The complete turns already in the repo (spoken questions, real
recordings) are referenced by path, not copied.

Every file's truth is measured (``speech_spans``): in the files made with
voices (digital silence around the speech) by energy: 10 ms frames within
``SPAN_DB`` dB of the file's loudest tenth are speech; in the real recordings,
whose hiss, breaths and applause are as loud as a soft syllable, by the
project's own detector (Silero with ``local-voice``'s ``[vad]`` settings, a
recording's: ``already_talking = "user"``). Gaps shorter than ``MERGE_S`` are
inside the speech; the turn's true end is the end of its last span, and every
gap between spans is a pause inside the turn (a turn decided before the true
end is a cut-in). A span's text: for the
synthesized files, the pieces it holds; for real recordings, the reference's
words spread over the spans in order (what a recogniser would have
heard by each pause: as many as whisper tiny.en's word timestamps put in
each). Deterministic: the same packages give the
same bytes.
"""

from __future__ import annotations

import itertools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent
ROOT = FIXTURES.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from make_speech_fixtures import EDGE_S, Voices, _trim  # noqa: E402

from voice_membrane.listening.engines import make_vad  # noqa: E402
from voice_membrane.listening.vad import SpeechEnd, SpeechStart, block_levels  # noqa: E402
from voice_membrane.pipeline.config import load_pipeline  # noqa: E402
from voice_membrane.vocab.audio import Samples  # noqa: E402

RATE = 16_000
LOCAL_VOICE = ROOT / "pipelines" / "local-voice.toml"
FRAME = RATE // 100  # 10 ms
SPAN_DB = 20.0  # speech: within this of the loudest tenth of the 10 ms frames
MERGE_S = 0.25  # shorter gaps are inside the speech (a stop, a breath between words)
MIN_SPAN_S = 0.05  # shorter "spans" are clicks
FILLERS, FILLER_RATE = ("um", "uh"), 0.6
QUIET_DB = 30.0  # a comma's gap: 10 ms frames this far under the loudest

Piece = str | float  # words to say, or seconds of silence


@dataclass(frozen=True)
class Said:
    name: str
    voice: str  # "piper:joe" or "espeak:VOICE"
    pieces: tuple[Piece, ...]

    @property
    def text(self) -> str:
        return " ".join(p for p in self.pieces if isinstance(p, str))


JOE, US, GB, F3, SCOT, CARIB = (
    "piper:joe",
    "espeak:en-us",
    "espeak:en-gb",
    "espeak:en-us+f3",
    "espeak:en-gb-scotland",
    "espeak:en-029",
)
PAUSED = (
    Said("book_table_um", JOE, ("I'd like to book a table for", 0.8, "um", 0.9, "four people")),
    Said("eggs_milk_bread", JOE, ("I need eggs,", 0.7, "milk,", 0.8, "and bread")),
    Said("thing_is", JOE, ("so the thing is", 1.0, "I was wondering whether you could help me")),
    Said("remind_dentist", JOE, ("can you remind me to call", 1.5, "my dentist tomorrow")),
    Said("baker_street", JOE, ("the address is twenty two", 1.0, "baker street")),
    Said("weather_uh", JOE, ("what's the weather like in", 1.3, "uh", 0.6, "Lisbon")),
    Said("beatles", JOE, ("play something by", 2.0, "the Beatles")),
    Said("reset_password", JOE, ("how do I", 1.2, "reset my password")),
    Said("card_digits", JOE, ("my card number ends in", 1.0, "four four", 0.8, "one two")),
    Said("last_time", JOE, ("because the last time I tried", 1.0, "it didn't work")),
    Said("alarm_six", US, ("set an alarm for", 1.2, "six thirty")),
    Said("fly_chicago", US, ("I want to fly to", 0.6, "um", 1.0, "Chicago on Friday")),
    Said("zip_code", US, ("my zip code is nine four", 1.5, "one zero seven")),
    Said("apples_list", US, ("add apples,", 0.9, "bananas,", 1.1, "and some coffee to the list")),
    Said("printer", US, ("the problem is", 1.8, "the printer keeps jamming")),
    Said("history_rome", US, ("tell me about", 0.5, "um", 0.5, "the history of Rome")),
    Said("chicken_salad", US, ("I'd like to order", 1.1, "the chicken salad", 0.7, "and a soda")),
    Said("station_way", GB, ("could you tell me how to get to", 1.0, "the station")),
    Said("pizza_uh", GB, ("I'd like a large pizza with", 0.7, "uh", 0.8, "mushrooms and olives")),
    Said("code_4729", GB, ("the code is four seven", 0.9, "two nine")),
    Said("saturday", GB, ("I was thinking", 1.4, "maybe we could go on Saturday")),
    Said("message_sarah", GB, ("send a message to", 0.5, "Sarah saying I'll be late")),
    Said("hotel_airport", GB, ("I'm looking for a hotel near", 2.0, "the airport")),
    Said("flight_number", F3, ("my flight number is", 1.1, "B A four nine two")),
    Said("present_um", F3, ("I need to buy", 0.8, "um", 1.2, "a birthday present for my sister")),
    Said("meeting_tuesday", F3, ("the meeting is on", 1.6, "Tuesday at ten")),
    Said("how_long", F3, ("so what I really want to know is", 0.9, "how long it takes")),
    Said("two_adults", F3, ("let me think,", 1.5, "two adults and three children")),
    Said("heating", SCOT, ("turn the heating up to", 1.0, "twenty one degrees")),
    Said("call_uh", SCOT, ("call", 0.7, "uh", 0.7, "my brother")),
    Said("flour_sugar", SCOT, ("first we need flour,", 1.0, "then sugar,", 1.0, "then butter")),
    Said("taxi_uh", CARIB, ("book me a taxi to", 0.8, "uh", 1.0, "the train station")),
    Said("forty_nine", CARIB, ("the total was forty", 1.2, "nine dollars")),
)
# The same kind of sentences said at once, by other voices: complete turns.
FLUENT = (
    Said("fluent_book_table", US, ("I'd like to book a table for four people",)),
    Said("fluent_number", GB, ("my number is five five five zero one two three",)),
    Said("fluent_eggs", F3, ("I need eggs, milk, and bread",)),
    Said("fluent_dentist", SCOT, ("can you remind me to call my dentist tomorrow",)),
    Said("fluent_alarm", JOE, ("set an alarm for six thirty",)),
    Said("fluent_printer", JOE, ("the problem is the printer keeps jamming",)),
    Said("fluent_station", CARIB, ("could you tell me how to get to the station",)),
    Said("fluent_meeting", JOE, ("the meeting is on Tuesday at ten",)),
    Said("fluent_heating", GB, ("turn the heating up to twenty one degrees",)),
    Said("fluent_taxi", US, ("book me a taxi to the train station",)),
)
# Complete turns already in the repo, by path under audio_fixtures/; their
# source is documented where they live.
QUESTIONS = "speech/questions"
REAL = (
    # read sentences that end a thought (real/read/SOURCES.md; not jfk_ask_not:
    # the crowd's applause follows the last word at once)
    "real/read/austen_0870.flac",
    "real/read/go_forward.flac",
    "real/read/go_somewhere.flac",
    "real/read/feels_like_forever.flac",
    "real/read/librispeech_61_70968_0000.flac",
    "real/read/sonnet1_lines13_14.flac",
    # podcast talk that ends a sentence (real/spontaneous/SOURCES.md)
    "real/spontaneous/podcast_sloth.flac",
    "real/spontaneous/podcast_us_3.flac",
    "real/spontaneous/podcast_us_5.flac",
    # short answers (real/words/SOURCES.md)
    "real/words/common_voice_en_22058264.flac",
    "real/words/common_voice_en_22058266.flac",
    "real/words/common_voice_en_22058267.flac",
    "real/words/cards_001.flac",
    "real/words/cards_003.flac",
)
# The listening fixtures' question (listening/make_fixtures.py: Piper's joe).
WEATHER = "listening/weather.wav"
# A phone number read out with a 1.2 s pause (scripts/make_speech_fixtures.py).
MID_PAUSE = "speech/mid_pause.wav"
MID_PAUSE_PARTS = ["my number is five five five", "zero one two three"]
# Readings of 22-29 s: the pauses between their sentences are not turn ends,
# the whole file is one turn (long_talkers/SOURCES.md).
READINGS = (
    "long_talkers/austen_dashwood.flac",
    "long_talkers/sonnet1_a.flac",
    "long_talkers/sonnet1_b.flac",
    "real/long/two_cities_2.flac",
)
# Real people talking freely for 25 s, one turn each, with their own pauses
# mid-thought (1.09 s and 1.12 s, "here's a long pause"): thinking pauses
# (real/long/SOURCES.md).
MONOLOGUES = (
    "real/long/monologue_acoustic.flac",
    "real/long/monologue_cold.flac",
)


def speech_spans(samples: Samples, real: bool) -> list[tuple[int, int]]:
    """The speech in ``samples`` as (start, end) sample spans (module docstring)."""
    found = _detected(samples) if real else _loud(samples)
    spans: list[list[int]] = []
    for start, end in found:
        if spans and start - spans[-1][1] < MERGE_S * RATE:
            spans[-1][1] = end
        else:
            spans.append([start, end])
    return [(a, b) for a, b in spans if b - a >= MIN_SPAN_S * RATE]


def _loud(samples: Samples) -> list[tuple[int, int]]:
    n = len(samples) // FRAME
    levels = np.array(block_levels(samples[: n * FRAME], FRAME))
    loud = np.flatnonzero(levels >= np.percentile(levels, 90) - SPAN_DB)
    return [(f * FRAME, (f + 1) * FRAME) for f in loud.tolist()]


def _detected(samples: Samples) -> list[tuple[int, int]]:
    settings = load_pipeline(LOCAL_VOICE).vad.model_copy(update={"already_talking": "user"})
    vad = make_vad(settings, RATE)
    padded = np.concatenate([samples, np.zeros(RATE, np.int16)])  # (room to see the end)
    events = vad.feed(padded) + vad.flush()
    starts = [e.at_sample for e in events if isinstance(e, SpeechStart)]
    ends = [min(e.at_sample, len(samples)) for e in events if isinstance(e, SpeechEnd)]
    return list(zip(starts, ends, strict=True))


def _seconds(at: int) -> float:
    return round(at / RATE, 3)


def _spread(words: list[str], spans: list[tuple[int, int]], samples: Samples) -> list[str]:
    """``words`` over ``spans``, in order, as many in each as whisper tiny.en
    hears there (its words' timestamps; the counts scaled to the reference's)."""
    if len(spans) == 1:
        return [" ".join(words)]
    heard = [0] * len(spans)
    for at in _whisper_word_times(samples):
        nearest = min(range(len(spans)), key=lambda i: _distance(spans[i], at))
        heard[nearest] += 1
    total, texts, done, counted = max(1, sum(heard)), [], 0, 0
    for count in heard:
        counted += count
        upto = round(len(words) * counted / total)
        texts.append(" ".join(words[done:upto]))
        done = upto
    return texts


def _distance(span: tuple[int, int], at: int) -> int:
    return 0 if span[0] <= at < span[1] else min(abs(at - span[0]), abs(at - span[1]))


def _whisper_word_times(samples: Samples) -> list[int]:
    """The middle sample of each word whisper tiny.en hears in ``samples``."""
    from faster_whisper import WhisperModel

    from voice_membrane.stt.registry import embedded_whisper

    model = WhisperModel(embedded_whisper(), device="cpu", compute_type="int8", cpu_threads=2)
    segments, _ = model.transcribe(
        samples.astype(np.float32) / 32768, language="en", beam_size=5, word_timestamps=True
    )
    return [round((w.start + w.end) / 2 * RATE) for s in segments for w in s.words or ()]


def entry(
    rel: str,
    samples: Samples,
    text: str,
    kind: str,
    source: str,
    texts: list[str] | None = None,
) -> dict[str, object]:
    real = source.startswith("real")
    spans = speech_spans(samples, real)
    texts = texts if texts is not None and len(texts) == len(spans) else None
    if texts is None:  # real speech, or a piece the measure split: words by length
        texts = _spread(text.split(), spans, samples)
    return {
        "file": rel,
        "text": text,
        "kind": kind,
        "source": source,
        "truth": "detector" if real else "energy",
        "duration_s": _seconds(len(samples)),
        "spans": [[_seconds(a), _seconds(b), t] for (a, b), t in zip(spans, texts, strict=True)],
        "end_s": _seconds(spans[-1][1]),
        "pauses": [[_seconds(a[1]), _seconds(b[0])] for a, b in itertools.pairwise(spans)],
    }


def _say(voices: Voices, said: Said) -> tuple[Samples, list[str]]:
    """The utterance, and the text of each stretch of speech (between the pauses)."""
    texts = [p for p in said.pieces if isinstance(p, str)]
    pauses = [p for p in said.pieces if isinstance(p, float)]
    sentence = ", ".join(t.rstrip(",") for t in texts)
    speech = _trim(voices.say(sentence, said.voice, 1.0))
    gaps = sorted(sorted(_quiet_gaps(speech), key=lambda g: g[0] - g[1])[: len(pauses)])
    if len(gaps) != len(pauses):
        raise RuntimeError(f"{said.name}: {len(gaps)} gaps for {len(pauses)} pauses")
    bounds = [0, *[at for gap in gaps for at in gap], len(speech)]
    spoken = [speech[a:b] for a, b in zip(bounds[::2], bounds[1::2], strict=True)]
    # a filler said in the sentence lasts 0.1-0.2 s, under the detector's
    # min_speech_s: said alone and drawn out, as people do, it is 0.3-0.5 s
    spoken = [
        _trim(voices.say(t, said.voice, FILLER_RATE)) if t in FILLERS else piece
        for t, piece in zip(texts, spoken, strict=True)
    ]
    edge = np.zeros(round(EDGE_S * RATE), np.int16)
    parts = [edge, spoken[0]]
    for pause, piece in zip(pauses, spoken[1:], strict=True):
        parts += [np.zeros(round(pause * RATE), np.int16), piece]
    return np.concatenate([*parts, edge]), texts


def _quiet_gaps(samples: Samples) -> list[tuple[int, int]]:
    """Stretches of at least 30 ms ``QUIET_DB`` under the loudest 10 ms."""
    n = len(samples) // FRAME
    levels = np.array(block_levels(samples[: n * FRAME], FRAME))
    quiet = np.concatenate([[False], levels < levels.max() - QUIET_DB, [False]])
    edges = np.flatnonzero(np.diff(quiet.astype(np.int8)))
    pairs = zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True)
    return [(a * FRAME, b * FRAME) for a, b in pairs if b - a >= 3]


def _read(rel: str) -> Samples:
    data, rate = soundfile.read(FIXTURES / rel, dtype="int16")
    assert rate == RATE and data.ndim == 1, rel
    return np.asarray(data, dtype=np.int16)


def _reference(rel: str) -> str:
    path = FIXTURES / rel
    if path.parent.name == "questions":
        index = json.loads((FIXTURES / "speech" / "index.json").read_text())
        return str(index[f"questions/{path.name}"]["text"])
    return str(json.loads((path.parent / "references.json").read_text())[path.name])


def _voice(rel: str) -> str:
    index = json.loads((FIXTURES / "speech" / "index.json").read_text())
    return str(index[rel.removeprefix("speech/")]["voice"])


def make() -> list[dict[str, object]]:
    voices = Voices()
    entries: list[dict[str, object]] = []
    for group, kind in ((PAUSED, "thinking_pause"), (FLUENT, "complete")):
        for said in group:
            samples, texts = _say(voices, said)
            if len(speech_spans(samples, False)) != len(texts):  # (a gap taken in a word)
                raise RuntimeError(f"{said.name}: its pieces are not its spans of speech")
            rel = f"turns/{said.name}.flac"
            soundfile.write(FIXTURES / rel, samples, RATE, subtype="PCM_16")
            entries.append(entry(rel, samples, said.text, kind, said.voice, texts))
    mid = _read(MID_PAUSE)
    entries.append(
        entry(MID_PAUSE, mid, " ".join(MID_PAUSE_PARTS), "thinking_pause", JOE, MID_PAUSE_PARTS)
    )
    weather = (FIXTURES / WEATHER).with_suffix(".txt").read_text().strip()
    entries.append(entry(WEATHER, _read(WEATHER), weather, "complete", JOE))
    for path in sorted((FIXTURES / QUESTIONS).glob("*.wav")):
        rel = f"{QUESTIONS}/{path.name}"
        entries.append(entry(rel, _read(rel), _reference(rel), "complete", _voice(rel)))
    for rel in REAL:
        source = f"real recording ({rel.rsplit('/', 1)[0]}/SOURCES.md)"
        entries.append(entry(rel, _read(rel), _reference(rel), "complete", source))
    for rel in READINGS:
        source = f"real reading, one turn ({rel.rsplit('/', 1)[0]}/SOURCES.md)"
        entries.append(entry(rel, _read(rel), _reference(rel), "complete", source))
    for rel in MONOLOGUES:
        source = "real monologue, one turn (real/long/SOURCES.md)"
        entries.append(entry(rel, _read(rel), _reference(rel), "thinking_pause", source))
    return entries


def main() -> None:
    entries = make()
    (HERE / "manifest.json").write_text(json.dumps(entries, indent=1) + "\n", encoding="utf-8")
    size = sum(p.stat().st_size for p in HERE.glob("*.flac"))
    kinds = [e["kind"] for e in entries]
    print(
        f"{len(entries)} turns ({kinds.count('complete')} complete, "
        f"{kinds.count('thinking_pause')} with thinking pauses); "
        f"{size / 1e6:.2f} MB of FLAC written"
    )


if __name__ == "__main__":
    main()
