"""The blocking half of the pocketsphinx engine: what runs on its worker thread.

``Utterance`` drives one ``pocketsphinx.Decoder`` through one utterance. Audio
is cut at every ``block`` samples of the stream (not at the caller's push
sizes), and the hypothesis is read only at those boundaries, so the partials —
like the final — depend on the audio alone, never on how it was chunked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..listening.wer import normalize
from ..vocab.transcripts import Transcript, Word
from .base import SttError

RATE = 16000
_VARIANT = re.compile(r"\(\d+\)$")  # "the(2)": the dictionary's second pronunciation
_NOT_WORDS = frozenset({"<s>", "</s>", "<sil>", "<unk>"})


def decoder_config(
    acoustic_model: str | None, dictionary: str | None, language_model: str | None
) -> dict[str, Any]:
    """The Decoder's keyword arguments; ``SttError`` (one line) for a path that is
    not there (pocketsphinx itself would only log it and fail vaguely)."""
    config: dict[str, Any] = {"loglevel": "FATAL", "samprate": RATE}
    for key, path, want_dir in (
        ("hmm", acoustic_model, True),
        ("dict", dictionary, False),
        ("lm", language_model, False),
    ):
        if path is None:
            continue
        exists = Path(path).is_dir() if want_dir else Path(path).is_file()
        if not exists:
            what = "acoustic model folder" if want_dir else f"{_NAMES[key]} file"
            raise SttError(f"pocketsphinx: no such {what}: {path}")
        config[key] = path
    return config


_NAMES = {"dict": "dictionary", "lm": "language model"}


def load_decoder(config: dict[str, Any], grammar: str | None) -> Any:
    """A Decoder with ``config`` (and ``grammar`` active); ``SttError`` one line."""
    from pocketsphinx import Decoder  # type: ignore[import-untyped]

    try:
        decoder = Decoder(**config)
    except (RuntimeError, ValueError, KeyError) as exc:
        raise SttError(f"pocketsphinx: cannot load the model: {_first_line(exc)}") from None
    if grammar is not None:
        use_grammar(decoder, grammar)
    return decoder


def use_grammar(decoder: Any, grammar: str) -> None:
    try:
        decoder.add_jsgf_string("phrases", grammar)
        decoder.activate_search("phrases")
    except (RuntimeError, ValueError, KeyError) as exc:
        raise SttError(f"pocketsphinx: cannot use the phrases: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def phrase_grammar(phrases: Sequence[str]) -> tuple[str, frozenset[str]]:
    """A JSGF grammar whose sentences are exactly ``phrases`` (normalised as WER
    does: lowercase, no punctuation, small numbers as words), and those phrases."""
    normalized = sorted({" ".join(normalize(p)) for p in phrases} - {""})
    if not normalized:
        raise SttError("pocketsphinx: phrases has no words")
    alternatives = " | ".join(normalized)
    return f"#JSGF V1.0;\ngrammar phrases;\npublic <phrase> = {alternatives};\n", frozenset(
        normalized
    )


def unknown_words(decoder: Any, phrases: frozenset[str]) -> list[str]:
    """The words of ``phrases`` the pronunciation dictionary lacks."""
    words = sorted({w for p in phrases for w in p.split()})
    return [w for w in words if decoder.lookup_word(w) is None]


class Utterance:
    """One utterance through a decoder (call only from the worker thread)."""

    def __init__(
        self, decoder: Any, block: int, phrases: frozenset[str] | None, initial_cmn: str
    ) -> None:
        self.decoder = decoder
        self._block = block
        self._phrases = phrases
        self._samples = 0  # fed to the decoder
        self._held = bytearray()  # less than a block, waiting for the rest
        self._last_partial = ""
        self._frate = int(decoder.config["frate"])
        # Each utterance from the engine's normalisation, not from whatever the
        # pooled decoder last heard: the same utterances in the same order give
        # the same words.
        decoder.set_cmn(initial_cmn)
        decoder.start_utt()
        self.open = True

    def process(self, data: bytes) -> list[Transcript]:
        """Decode ``data`` (int16 bytes); the partials it changed, at block ends.

        The decoder is fed whole blocks only (the rest waits for the next push or
        the end): its live normalisation updates per call, so feeding it the
        caller's chunk sizes would make the result depend on them."""
        out: list[Transcript] = []
        self._held += data
        size = self._block * 2
        whole = len(self._held) - len(self._held) % size
        for offset in range(0, whole, size):
            self.decoder.process_raw(bytes(self._held[offset : offset + size]), False, False)
            self._samples += self._block
            partial = self._partial()
            if partial is not None:
                out.append(partial)
        del self._held[:whole]
        return out

    def finish(self) -> Transcript | None:
        """End the utterance: its final transcript, or None if nothing was heard."""
        self.open = False
        if self._held:
            self.decoder.process_raw(bytes(self._held), False, False)
            self._samples += len(self._held) // 2
            self._held.clear()
        self.decoder.end_utt()
        words = self._words()
        text = " ".join(w.text for w in words)
        if not words or (self._phrases is not None and text not in self._phrases):
            return None  # nothing, or (grammar) a phrase not completed: not heard
        confidences = [w.confidence for w in words if w.confidence is not None]
        confidence = sum(confidences) / len(confidences) if confidences else None
        return Transcript(text, True, tuple(words), words[0].start_s, words[-1].end_s, confidence)

    def abandon(self) -> None:
        if self.open:
            self.open = False
            self.decoder.end_utt()

    def _partial(self) -> Transcript | None:
        hyp = self.decoder.hyp()
        text = " ".join(_clean(w) for w in (hyp.hypstr.split() if hyp else ()) if _clean(w))
        if not text or text == self._last_partial:
            return None
        self._last_partial = text
        return Transcript(text, False, start_s=0.0, end_s=self._samples / RATE)

    def _words(self) -> list[Word]:
        audio_s = self._samples / RATE
        words: list[Word] = []
        for seg in self.decoder.seg():
            text = _clean(seg.word)
            if not text:
                continue
            start = min(seg.start_frame / self._frate, audio_s)
            end = min((seg.end_frame + 1) / self._frate, audio_s)
            confidence = min(max(float(seg.prob), 0.0), 1.0)
            words.append(Word(text, start, max(end, start), confidence))
        return words


def _clean(word: str) -> str:
    """A decoder word as said: "" for silence, sentence marks and fillers
    ("[NOISE]", "++BREATH++"), the pronunciation variant dropped."""
    if word in _NOT_WORDS or word.startswith(("[", "+", "<")):
        return ""
    return _VARIANT.sub("", word)
