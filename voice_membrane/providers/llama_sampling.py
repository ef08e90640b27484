"""How the embedded model picks its tokens and when it stops: the llama.cpp sampling
knobs and the sentence limit a pipeline sets (``[llm]`` in a pipeline file;
docs/pipelines.md says the defaults and why)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..chunking.chunker import SpeechChunk, SpeechChunker
from ..chunking.cut_off import CLOSERS, ends_sentence
from ..chunking.sentences import TERMINALS

_UNLIMITED = 10**9
# A mark that may end a sentence (before the space that must follow it), or a line end.
_MAY_END = re.compile(rf"[{''.join(sorted(TERMINALS))}][{CLOSERS}]*(?=\s)|\n")


def sentence_chunker() -> SpeechChunker:
    """A speech chunker that cuts only where a sentence (or a line) ends, on the text
    as it is (no filter): its pieces concatenated are the text. A short first piece
    (a leading interjection, ``Hey,``) may still come alone: ``ends_a_sentence``
    tells."""
    return SpeechChunker(
        first_chunk_words=_UNLIMITED,
        min_clause_words=_UNLIMITED,
        clause_chars=_UNLIMITED,
        max_chars=_UNLIMITED,
        markdown=False,
        urls=False,
        symbols=False,
    )


def ends_a_sentence(piece: SpeechChunk) -> bool:
    """Whether a piece of ``sentence_chunker`` ends a sentence or a line."""
    return ends_sentence(piece.text) or piece.text.endswith("\n")


@dataclass(frozen=True, slots=True)
class LlamaSampling:
    """The knobs beside temperature and seed.

    ``top_p``, ``top_k``, ``min_p``: the candidate tokens kept before sampling (the
    nucleus, the k most likely, those at least ``min_p`` times the likeliest one);
    ``repeat_penalty`` (1: none) makes a token seen in the last 64 less likely;
    ``stop``: strings that end the reply where they appear (not said);
    ``max_sentences``: the reply ends after this many sentences (0: no limit)."""

    # llama.cpp's own defaults and no limit: a tool call (JSON) must not be cut or
    # its repeated quotes penalised. The embedded voice pipelines set their own,
    # measured on SmolLM2-135M (docs/pipelines.md, "The embedded model's answers").
    top_p: float = 0.9
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    stop: tuple[str, ...] = ()
    max_sentences: int = 0

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments for llama.cpp's ``create_chat_completion``."""
        return {
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repeat_penalty": self.repeat_penalty,
            "stop": list(self.stop),
        }


class SentenceLimit:
    """Where a streamed reply reaches its last allowed sentence (sans-I/O).

    The sentences are the speech chunker's (its sentence-end rules: ``Dr.``, ``3.14``
    and ``e.g.`` end nothing; a line break ends a line), on the text as it is. An end
    is known only once the text after it shows it (``. The``), so while the last
    allowed sentence is under way, text after a mark that may end it is held until
    the chunker decides: nothing of a sentence past the limit is given. ``feed``
    returns what may be said now, ``flush`` (at the end of the stream) the rest."""

    def __init__(self, max_sentences: int) -> None:
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be at least 1, got {max_sentences}")
        self.max_sentences = max_sentences
        self.reached = False
        self._sentences = 0
        self._text = ""
        self._given = 0  # characters of _text returned so far
        self._ended_at = 0  # where the last released piece ended
        self._chunker = sentence_chunker()

    def feed(self, delta: str) -> str:
        """The text that may be said now (nothing once the limit is reached)."""
        if self.reached:
            return ""
        self._text += delta
        for piece in self._chunker.feed(delta):
            self._ended_at += len(piece.text)
            self._sentences += ends_a_sentence(piece)
            if self._sentences == self.max_sentences:
                self.reached = True
                return self._give(len(self._text[: self._ended_at].rstrip()))
        safe = len(self._text)
        if self._sentences == self.max_sentences - 1:
            ends = list(_MAY_END.finditer(self._text, self._ended_at))
            if ends:
                safe = ends[-1].end()
        return self._give(safe)

    def flush(self) -> str:
        """The end of the stream: what was held (nothing once the limit is reached)."""
        return "" if self.reached else self._give(len(self._text))

    def _give(self, upto: int) -> str:
        given = self._text[self._given : upto] if upto > self._given else ""
        self._given = max(self._given, upto)
        return given
