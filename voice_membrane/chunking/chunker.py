"""The speech chunker: visible LLM text in, speakable pieces for a TTS engine out."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

from .boundaries import find_cut
from .cut_off import CUT_OFF_TEXT, ends_sentence, without_unfinished_word
from .lexicon import lexicon
from .markdown import Segment
from .pending import Cut, CutKind, CutRules
from .phrase_guard import PhraseGuard
from .speech_text import SpeechText
from .tables import TableMode

# A held piece waits no longer than this on a silent stream (``idle_flush_s``): a
# stream's deltas come well within it unless the stream pauses or stalls.
IDLE_FLUSH_S = 1.0

ChunkKind: TypeAlias = Literal["first", "clause", "sentence", "forced", "final", "idle", "cue"]

# A word-boundary cut only ever releases the first piece, which is "first" anyway.
_KINDS: dict[CutKind, ChunkKind] = {
    "sentence": "sentence",
    "clause": "clause",
    "word": "first",
    "forced": "forced",
}


@dataclass(frozen=True, slots=True)
class SpeechChunk:
    """A piece of text to speak.

    Attributes:
        text: the speakable piece, markdown removed. Never empty or whitespace-only;
            it may begin with whitespace (the space after the previous cut).
        kind: ``"first"`` for a stream's first piece, whatever released it; else
            ``"sentence"`` (a sentence end or a newline), ``"clause"``, ``"forced"``
            (``max_chars`` reached), ``"final"`` (released by ``flush``), or
            ``"idle"`` (released by ``flush_held``: the stream paused), or ``"cue"``
            (``cut_off_text``, said after a sentence the token limit cut; its raw
            span is empty, at the end).
        start, end: the raw-input span the piece covers. Pieces tile the raw input:
            the first starts at 0, each starts where the previous ended, and ``end`` is
            the raw offset just after the piece's last character, so markdown removed
            between two pieces belongs to the later one. The last piece ``flush``
            returns ends at the total raw length.
    """

    text: str
    kind: ChunkKind
    start: int
    end: int


class SpeechChunker:
    """Cut streamed visible text into pieces a TTS engine can start speaking early.

    A plain sans-I/O class: ``feed`` text in pieces of any size (LLM tokens or one big
    string) and get the pieces it released; ``flush`` at the end of the stream to get
    the rest, after which the chunker starts a new stream. The pieces do not depend on
    how the text was split: every decision depends only on the text itself, waiting
    for the few characters it needs, and ``flush`` makes end-of-stream the lookahead.

    The text first goes through ``SpeechText``: with ``markdown`` on (the default),
    ``MarkdownFilter`` (``code_block_text`` is spoken in place of a fenced code block)
    and ``TableFilter`` (``tables``, ``table_text``); then ``SpeakableFilter`` (``urls``,
    ``symbols``); last, with a ``phrase_guard``, ``PhraseFilter``. Concatenated, the
    pieces give the filtered text, except a whitespace-only remainder at the end.

    The first piece is released as early as it sounds natural: at a sentence end, at a
    clause mark after ``min_clause_words`` words, or at a word boundary after
    ``first_chunk_words`` words unless the word before it cannot end a phrase (a
    function word, a number, a title or abbreviation, a word ending in a hyphen).
    Later pieces are whole sentences, split at clause marks once ``clause_chars``
    long and forced at a space when ``max_chars`` long. See ``boundaries`` and the
    rule modules it names (``sentences``, ``phrases``, ``quotes``) for the exact rules.

    Args:
        first_chunk_words: words the first piece needs before a word boundary may
            release it.
        min_clause_words: words the first piece needs before a clause mark may
            release it.
        clause_chars: characters a later piece needs before a clause mark may end it.
        max_chars: the longest piece, not counting its leading whitespace.
        markdown: remove markdown before chunking.
        code_block_text: spoken in place of each fenced code block (markdown only);
            None skips code blocks silently.
        tables: ``"rows"`` says each row of a pipe table as a phrase (``Paris: High
            12.``), ``"skip"`` skips tables (markdown only).
        table_text: with ``tables="skip"``, spoken in place of each table; None skips
            tables silently.
        urls: say a URL as its host (``help.example.com``) and an e-mail address as
            ``name at example.com``.
        symbols: emoji, pictographs, arrows and decorative symbols are not spoken.
        language: the reply's language, one of ``lexicon.LANGUAGES`` (``"en"``,
            ``"de"``, ``"fr"``, ``"es"``, ``"it"``, ``"nl"``, ``"pt"``): its
            abbreviations, ordinals and sentence openers. None (the default) knows
            every language's abbreviations and ordinals but only English openers.
        phrase_guard: phrases never to say (``PhraseGuard``), judged on the text as
            it will be said, after every other filter.
        idle_flush_s: how long the code driving the chunker waits on a silent
            stream before it calls ``flush_held`` (the chunker has no clock: it
            only carries the setting; ``pipeline.ChunkStage`` reads it); None: never.
        cut_off_text: said after a sentence the token limit cut, when the stream
            ends with ``flush(cut_off=True)`` (``cut_off``); None or "": no cue.

    Raises:
        ValueError: an option out of range or an unknown language.
    """

    def __init__(
        self,
        *,
        first_chunk_words: int = 3,
        min_clause_words: int = 3,
        clause_chars: int = 120,
        max_chars: int = 250,
        markdown: bool = True,
        code_block_text: str | None = None,
        tables: TableMode = "rows",
        table_text: str | None = None,
        urls: bool = True,
        symbols: bool = True,
        language: str | None = None,
        phrase_guard: PhraseGuard | None = None,
        idle_flush_s: float | None = IDLE_FLUSH_S,
        cut_off_text: str | None = CUT_OFF_TEXT,
    ) -> None:
        if first_chunk_words < 1 or max_chars < 1:
            raise ValueError("first_chunk_words and max_chars must be at least 1")
        if min_clause_words < 0 or clause_chars < 0:
            raise ValueError("min_clause_words and clause_chars must not be negative")
        if idle_flush_s is not None and not idle_flush_s > 0:
            raise ValueError(f"idle_flush_s must be positive or None, got {idle_flush_s}")
        self.idle_flush_s = idle_flush_s
        self.cut_off_text = (cut_off_text or "").strip()
        self._rules = CutRules(
            first_chunk_words, min_clause_words, clause_chars, max_chars, lexicon(language)
        )
        if tables not in ("rows", "skip"):
            raise ValueError(f'tables must be "rows" or "skip", not {tables!r}')
        self._filter = SpeechText(
            markdown=markdown,
            code_block_text=code_block_text,
            tables=tables,
            table_text=table_text,
            urls=urls,
            symbols=symbols,
            phrase_guard=phrase_guard,
        )
        self._reset()

    def _reset(self) -> None:
        self._pending = ""  # filtered text; released up to _done
        self._ends: list[int] = []  # raw offset just after each character of _pending
        self._code: list[bool] = []  # whether each character of _pending is inline code
        self._done = 0
        self._start = 0  # raw offset where the pending piece starts
        self._raw_len = 0
        self._released = False
        self._line_start = True
        # After flush_held, the first piece may hold nothing to say (the "." after a
        # word the pause let out): it is said with the piece after it, not alone.
        self._after_pause = False
        self._carry: SpeechChunk | None = None
        # What the pieces given out so far end on: nothing said yet, or whether
        # the last one ends a sentence (for a cut-off stream's end, cut_off.py).
        self._said = False
        self._said_sentence = False

    def feed(self, text: str) -> list[SpeechChunk]:
        """Add visible text; return the pieces it released (often none)."""
        if not text:
            return []
        self._raw_len += len(text)
        self._append(self._filter.feed(text))
        return self._given(self._drain(final=False))

    def flush(self, *, cut_off: bool = False) -> list[SpeechChunk]:
        """End the stream: return the remaining pieces and reset for a new stream.

        ``cut_off``: the stream was cut by the model's token limit, so its last
        sentence may be unfinished: the pieces end on the last sentence end, or,
        when a sentence was begun aloud, on its last complete word and the cue
        (``cut_off.py``). A stream that ended on its own is never changed."""
        self._append(self._filter.flush())
        chunks = self._drain(final=True)
        if self._pending[self._done :].strip():
            chunks += self._paused(self._release(len(self._pending) - self._done, "final"))
        if self._carry is not None:  # nothing came after it: it goes alone
            chunks.append(self._carry)
        if cut_off:
            chunks = self._cut_off(chunks)
        if chunks and chunks[-1].kind != "cue":
            # The stream's last piece also covers trailing whitespace and markup.
            last = chunks[-1]
            chunks[-1] = replace(
                last, kind="first" if last.kind == "first" else "final", end=self._raw_len
            )
        self._reset()
        return chunks

    def flush_held(self) -> list[SpeechChunk]:
        """The stream has paused: return what is held as pieces now, without
        ending the stream. The text that follows is read as it would have been:
        concatenated, the pieces are the same text as without the pause, only
        cut elsewhere. Held back still: a word that may yet become a URL or an
        address, and markdown or a table row being decided (``SpeechText``)."""
        self._append(self._filter.release_held())
        chunks = self._drain(final=False)
        if self._pending.strip():  # (a blank remainder waits for the next piece)
            chunks += self._paused(self._release(len(self._pending), "idle"))
            self._pending, self._ends, self._code, self._done = "", [], [], 0
        self._after_pause = self._after_pause or bool(chunks)
        return self._given(chunks)

    def _given(self, chunks: list[SpeechChunk]) -> list[SpeechChunk]:
        """Note what the pieces given out end on (a piece cut at a clause, a word
        or the limit ends no sentence, whatever its last character)."""
        if chunks:
            last = chunks[-1]
            self._said = True
            self._said_sentence = last.kind not in ("clause", "forced") and ends_sentence(last.text)
        return chunks

    def _cut_off(self, chunks: list[SpeechChunk]) -> list[SpeechChunk]:
        """A cut-off stream's last pieces (not yet given out): up to the last
        sentence end, or the sentence begun aloud finished with the cue."""
        for n in range(len(chunks), 0, -1):
            piece = chunks[n - 1]
            if n == len(chunks):  # the rest of the stream: the cut rules judge its end
                ended = self._ends_sentence_at_end(piece.text)
            else:
                ended = piece.kind not in ("clause", "forced") and ends_sentence(piece.text)
            if ended:
                return chunks[:n]
        if self._said and self._said_sentence:
            return []  # a new sentence, none of it said: the speech ends before it
        kept = list(chunks)
        if kept:
            text = without_unfinished_word(kept[-1].text)
            if any(ch.isalnum() for ch in text):
                kept[-1] = replace(kept[-1], text=text)
            else:
                kept.pop()
        if not (self._said or kept) or not self.cut_off_text:
            return kept
        # Words come before it (given out now or before): pieces do not end in a space.
        cue = SpeechChunk(f" {self.cut_off_text}", "cue", self._raw_len, self._raw_len)
        if kept:
            kept[-1] = replace(kept[-1], end=self._raw_len)
        return [*kept, cue]

    def _ends_sentence_at_end(self, text: str) -> bool:
        """Whether the cut rules end a sentence at the end of ``text`` when the
        stream ends there (``Dr.`` does not end one; ``etc.`` at the end does)."""
        probe = text.rstrip() + " "
        pos = 0
        while True:
            cut = find_cut(
                probe[pos:], first=False, final=True, line_start=False, rules=self._rules
            )
            if cut is None:
                return False
            pos += cut.pos
            if not probe[pos:].strip():
                return cut.kind == "sentence" and ends_sentence(probe[:pos])

    def _append(self, segments: list[Segment]) -> None:
        self._pending += "".join(seg.text for seg in segments)
        for seg in segments:
            self._code.extend([seg.code] * len(seg.text))
            if seg.end - seg.start == len(seg.text):
                self._ends.extend(range(seg.start + 1, seg.end + 1))
            else:  # a substitution: all of it stands for its whole span
                self._ends.extend([seg.end] * len(seg.text))

    def _drain(self, *, final: bool) -> list[SpeechChunk]:
        chunks: list[SpeechChunk] = []
        while (cut := self._next_cut(final)) is not None:
            chunk = self._release(cut.pos, _KINDS[cut.kind])
            if self._after_pause:
                chunks += self._paused(chunk)
            else:
                chunks.append(chunk)
        # Drop released text once per call, not once per cut: one big feed stays linear.
        self._pending, self._ends = self._pending[self._done :], self._ends[self._done :]
        self._code = self._code[self._done :]
        self._done = 0
        return chunks

    def _paused(self, chunk: SpeechChunk) -> list[SpeechChunk]:
        """The first piece after a pause: held if it says nothing (only
        punctuation or symbols), then said joined to the next."""
        if not self._after_pause:
            return [chunk]
        carry = self._carry
        if carry is not None:
            self._carry, self._after_pause = None, False
            return [replace(chunk, text=carry.text + chunk.text, start=carry.start)]
        if not any(ch.isalnum() for ch in chunk.text):
            self._carry = chunk
            return []
        self._after_pause = False
        return [chunk]

    def _next_cut(self, final: bool) -> Cut | None:
        # A cut found in a prefix of the pending text is the cut the whole text gives
        # (decisions never look past what they have), so scan a window a little longer
        # than max_chars and widen it only when the window cannot decide.
        size = 2 * self._rules.max_chars + 64
        while True:
            end = self._done + size
            whole = end >= len(self._pending)
            cut = find_cut(
                self._pending[self._done : end],
                first=not self._released,
                final=final and whole,
                line_start=self._line_start,
                rules=self._rules,
                code=self._code[self._done : end],
                lookahead=self._filter.lookahead() if whole and not final else "",
            )
            if cut is not None or whole:
                return cut
            size *= 2

    def _release(self, pos: int, kind: ChunkKind) -> SpeechChunk:
        text = self._pending[self._done : self._done + pos]
        self._done += pos
        end = self._ends[self._done - 1]
        chunk = SpeechChunk(text, kind if self._released else "first", self._start, end)
        self._start = end
        self._released = True
        self._line_start = text.endswith("\n")
        return chunk
