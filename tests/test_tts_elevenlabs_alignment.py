"""ElevenLabs alignment attributed to pieces, without a socket: chunks split at a
piece's first character, filler left out, and what a reconnect must resend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from voice_membrane.tts.base import TtsError, Voiced
from voice_membrane.tts.elevenlabs_alignment import PieceAttribution, SentText
from voice_membrane.vocab.audio import Samples

RATE = 1000  # one sample per millisecond: sample indices read as times
CHAR_MS = 10.0


def samples(n: int) -> Samples:
    return np.arange(n, dtype=np.int16)


def alignment(text: str, *, start_ms: float = 0.0) -> dict[str, Any]:
    """The service's alignment for ``text``, each character ``CHAR_MS`` long."""
    return {
        "chars": list(text),
        "charStartTimesMs": [start_ms + i * CHAR_MS for i in range(len(text))],
        "charDurationsMs": [CHAR_MS] * len(text),
    }


def sent(attribution: PieceAttribution, *pieces: str) -> None:
    """As the socket sends them: the initial space, then each piece (flushed)."""
    attribution.record_sent(" ", None, flush=False)
    for text in pieces:
        piece = attribution.add_piece(text)
        attribution.record_sent(attribution.texts[piece], piece, flush=True)


def chars(voiced: Voiced) -> str:
    assert voiced.alignment is not None
    return "".join(voiced.alignment.chars)


def test_sent_text_tells_pieces_from_filler() -> None:
    text = SentText()
    text.add(" ", None)
    text.add("ab ", 0)
    text.add(" ", None)
    text.add("c ", 1)
    assert [text.owner(i) for i in range(8)] == [None, 0, 0, 0, None, 1, 1, None]
    assert (text.length, text.owned_end) == (7, 7)
    text.add(" ", None)
    assert (text.length, text.owned_end) == (8, 7)


def test_a_chunk_straddling_two_pieces_is_split_at_the_second() -> None:
    attribution = PieceAttribution(RATE)
    sent(attribution, "Hi.", "Yo.")
    # " Hi. Yo. ": the whole connection's text in one chunk, 10 ms a character
    items = attribution.attribute(samples(90), alignment(" Hi. Yo. "), t_ns=7)
    assert [(v.piece, chars(v)) for v in items] == [(0, "Hi. "), (1, "Yo. ")]
    first, second = items
    # the split is at "Y", 50 ms in; the initial space's audio stays with piece 0
    assert first.audio.samples.tolist() == list(range(50))
    assert second.audio.samples.tolist() == list(range(50, 90))
    assert first.alignment is not None and second.alignment is not None
    assert first.alignment.start_ms == (10.0, 20.0, 30.0, 40.0)
    assert second.alignment.start_ms == (0.0, 10.0, 20.0, 30.0)  # from the split
    assert {v.t_ns for v in items} == {7}
    assert {v.audio.sample_rate for v in items} == {RATE}
    assert attribution.voiced == [4, 4] and attribution.all_voiced


def test_alignment_is_counted_across_chunks() -> None:
    attribution = PieceAttribution(RATE)
    sent(attribution, "ab", "cd")
    first = attribution.attribute(samples(30), alignment(" ab"), t_ns=0)
    assert [(v.piece, chars(v)) for v in first] == [(0, "ab")]
    assert not attribution.all_voiced
    second = attribution.attribute(samples(40), alignment(" cd "), t_ns=0)
    assert [(v.piece, chars(v)) for v in second] == [(0, " "), (1, "cd ")]
    assert second[0].audio.samples.tolist() == list(range(10))  # up to "c"
    assert second[1].audio.samples.tolist() == list(range(10, 40))
    assert attribution.voiced == [3, 3] and attribution.all_voiced


def test_audio_without_alignment_belongs_to_the_current_piece() -> None:
    attribution = PieceAttribution(RATE)
    sent(attribution, "ab", "cd")
    attribution.attribute(samples(60), alignment(" ab c"), t_ns=0)
    assert attribution.current == 1
    (item,) = attribution.attribute(samples(5), None, t_ns=3)
    assert (item.piece, item.alignment, len(item.audio.samples)) == (1, None, 5)
    assert attribution.attribute(samples(0), None, t_ns=3) == []


def test_the_other_duration_key_is_read() -> None:
    attribution = PieceAttribution(RATE)
    sent(attribution, "ab")
    raw = alignment(" ab ")
    raw["charsDurationsMs"] = raw.pop("charDurationsMs")
    (item,) = attribution.attribute(samples(40), raw, t_ns=0)
    assert item.alignment is not None and item.alignment.duration_ms == (CHAR_MS,) * 3


def test_alignment_lists_of_different_lengths_are_malformed() -> None:
    attribution = PieceAttribution(RATE)
    sent(attribution, "ab")
    raw = alignment(" ab ")
    raw["charDurationsMs"].pop()
    with pytest.raises(TtsError, match="malformed"):
        attribution.attribute(samples(40), raw, t_ns=0)


def test_flushing_state_follows_what_was_sent_and_voiced() -> None:
    attribution = PieceAttribution(RATE)
    assert attribution.all_voiced and not attribution.unflushed_waiting
    sent(attribution, "ab")  # flushed
    assert not attribution.all_voiced and not attribution.unflushed_waiting
    piece = attribution.add_piece("cd")
    attribution.record_sent(attribution.texts[piece], piece, flush=False)
    assert not attribution.unflushed_waiting  # "ab " is still being voiced
    attribution.attribute(samples(40), alignment(" ab "), t_ns=0)
    assert attribution.unflushed_waiting and not attribution.all_voiced
    attribution.record_sent(" ", None, flush=True)  # the bare flush
    assert not attribution.unflushed_waiting


def test_a_new_connection_resends_only_what_was_not_voiced() -> None:
    attribution = PieceAttribution(RATE)
    sent(attribution, "abc", "de")
    attribution.attribute(samples(30), alignment(" ab"), t_ns=0)
    assert list(attribution.unvoiced()) == [(0, "c "), (1, "de ")]
    attribution.new_connection()
    assert (attribution.aligned, attribution.flushed_to, attribution.sent.length) == (0, 0, 0)
    # the resend is counted from the new connection's start, its owners unchanged
    attribution.record_sent(" ", None, flush=False)
    for piece, rest in list(attribution.unvoiced()):
        attribution.record_sent(rest, piece, flush=False)
    items = attribution.attribute(samples(60), alignment(" c de "), t_ns=0)
    assert [(v.piece, chars(v)) for v in items] == [(0, "c "), (1, "de ")]
    assert attribution.voiced == [4, 3] and list(attribution.unvoiced()) == []
