"""Deepgram's live messages read into transcripts: a plain function, no I/O.

The service's output is untrusted input: a field of the wrong type is an
``SttError`` that names it (never a traceback), and the finals already read
stay with the caller. Word times are seconds from the stream's start, which is
the convention of ``vocab.transcripts``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..infra.redact import quote
from ..vocab.transcripts import Transcript, Word
from .base import SttError

NAME = "deepgram"


@dataclass(frozen=True, slots=True)
class Heard:
    """One ``Results`` message: its transcript (None when empty) and whether it
    answers our ``Finalize`` (the utterance's last)."""

    transcript: Transcript | None
    from_finalize: bool


def read_message(data: Any) -> Heard | None:
    """A parsed message: ``Heard`` for ``Results``, None for messages that carry no
    text (``Metadata``, ``SpeechStarted``, ``UtteranceEnd``, unknown types);
    ``SttError`` for ``Error`` and for a malformed ``Results``."""
    if not isinstance(data, dict):
        raise SttError(f"{NAME}: malformed message (not a JSON object): {quote(data, 80)}")
    kind = data.get("type")
    if kind == "Error":
        what = data.get("description") or data.get("message") or data.get("variant")
        raise SttError(f"{NAME}: the service reported an error: {quote(what, 200)}")
    if kind != "Results":
        return None
    alternatives = _field(data.get("channel"), "channel", dict).get("alternatives")
    alternatives = _field(alternatives, "channel.alternatives", list)
    if not alternatives:
        return Heard(None, bool(data.get("from_finalize")))
    best = _field(alternatives[0], "channel.alternatives[0]", dict)
    text = _field(best.get("transcript", ""), "transcript", str).strip()
    words = tuple(_word(w, i) for i, w in enumerate(_field(best.get("words", []), "words", list)))
    final = _flag(data, "is_final")
    finalize = _flag(data, "from_finalize")
    if not text:
        return Heard(None, finalize)
    start = _seconds(data.get("start"), "start")
    duration = _seconds(data.get("duration"), "duration")
    transcript = Transcript(
        text,
        final,
        words,
        start_s=start,
        end_s=None if start is None or duration is None else start + duration,
        confidence=_confidence(best.get("confidence"), "confidence"),
    )
    return Heard(transcript, finalize)


def _word(item: Any, index: int) -> Word:
    where = f"words[{index}]"
    word = _field(item, where, dict)
    text = word.get("punctuated_word") or word.get("word")
    start = _seconds(word.get("start"), f"{where}.start")
    end = _seconds(word.get("end"), f"{where}.end")
    if not isinstance(text, str) or start is None or end is None:
        raise SttError(f"{NAME}: malformed Results: {where} lacks its word, start or end")
    return Word(text, start, end, _confidence(word.get("confidence"), f"{where}.confidence"))


def _field(value: Any, where: str, kind: type) -> Any:
    if not isinstance(value, kind):
        raise SttError(
            f"{NAME}: malformed Results: {where} is {type(value).__name__}, "
            f"expected {kind.__name__}"
        )
    return value


def _flag(data: dict[str, Any], name: str) -> bool:
    value = data.get(name)
    if value is not None and not isinstance(value, bool):
        raise SttError(f"{NAME}: malformed Results: {name} is {type(value).__name__}, not a bool")
    return bool(value)


def _seconds(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SttError(f"{NAME}: malformed Results: {where} is not a number: {quote(value, 40)}")
    return float(value)


def _confidence(value: Any, where: str) -> float | None:
    seconds = _seconds(value, where)
    return None if seconds is None else min(1.0, max(0.0, seconds))
