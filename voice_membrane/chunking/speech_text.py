"""The text the chunker cuts: raw visible text through each streaming filter.

``SpeechText`` chains ``MarkdownFilter`` (markdown removed, headings and list items
ended), ``TableFilter`` (pipe tables said row by row or skipped) and
``SpeakableFilter`` (URLs said as hosts, e-mail addresses with "at", symbols and
emoji not said), then, given a ``PhraseGuard``, ``PhraseFilter`` (banned phrases
cut from the text as it will be said). Each holds back only what it cannot
decide yet; together they give the same ``Segment``\\ s however the raw text
was split.
"""

from __future__ import annotations

from .markdown import MarkdownFilter, Segment
from .phrase_filter import PhraseFilter
from .phrase_guard import PhraseGuard
from .speakable import SpeakableFilter
from .tables import TableFilter, TableMode


class SpeechText:
    """Raw visible text in, speakable ``Segment``\\ s (with their raw spans) out.

    ``markdown`` off passes the text through unchanged but for URLs and symbols
    (tables are markdown, so they pass through too). ``phrase_guard`` judges what
    all the others let through. ``flush`` ends the stream and resets the chain
    for a new one (the guard keeps the end of what was said: see ``PhraseFilter``).
    """

    def __init__(
        self,
        *,
        markdown: bool = True,
        code_block_text: str | None = None,
        tables: TableMode = "rows",
        table_text: str | None = None,
        urls: bool = True,
        symbols: bool = True,
        phrase_guard: PhraseGuard | None = None,
    ) -> None:
        self._markdown = MarkdownFilter(code_block_text=code_block_text) if markdown else None
        self._tables = TableFilter(mode=tables, table_text=table_text) if markdown else None
        self._speakable = SpeakableFilter(urls=urls, symbols=symbols) if urls or symbols else None
        self._guard = PhraseFilter(phrase_guard) if phrase_guard is not None else None
        self._raw_len = 0

    def lookahead(self) -> str:
        """The start of the text held back that is sure to be said as it is (see
        ``SpeakableFilter.lookahead``); "" when that is not known."""
        following = self._speakable.lookahead() if self._speakable is not None else ""
        return self._guard.lookahead(following) if self._guard is not None else following

    def release_held(self) -> list[Segment]:
        """The stream paused: what may go out now without changing what any
        continuation says (``SpeakableFilter.release_word``), judged by the phrase
        guard like any text (it keeps holding what a phrase may be forming in).
        Markdown and table syntax still being decided stays held: it is short, or
        a table row."""
        segments = self._speakable.release_word() if self._speakable is not None else []
        if self._guard is not None and segments:
            segments = self._guard.feed(segments)
        return segments

    def feed(self, text: str) -> list[Segment]:
        if not text:
            return []
        start = self._raw_len
        self._raw_len += len(text)
        if self._markdown is None:
            segments = [Segment(text, start, self._raw_len)]
        else:
            segments = self._markdown.feed(text)
        if self._tables is not None:
            segments = self._tables.feed(segments)
        if self._speakable is not None:
            segments = self._speakable.feed(segments)
        if self._guard is not None:
            segments = self._guard.feed(segments)
        return segments

    def flush(self) -> list[Segment]:
        segments = self._markdown.flush() if self._markdown is not None else []
        if self._tables is not None:
            segments = self._tables.feed(segments) + self._tables.flush()
        if self._speakable is not None:
            segments = self._speakable.feed(segments) + self._speakable.flush()
        if self._guard is not None:
            segments = self._guard.feed(segments) + self._guard.flush()
        self._raw_len = 0
        return segments
