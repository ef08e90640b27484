"""Speech-chunker benchmark: how many LLM tokens until the first piece can be spoken,
and whether any cut falls inside a hazard span, for the library's ``SpeechChunker``
against the naive splitters of ``benchmarks.baselines``, each reply fed one token
(``benchmarks.tokens``) per ``feed()``; its sections words the method
(``sections/chunker.md``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from benchmarks.baselines import SentenceSplitter
from benchmarks.prose import prose, title
from benchmarks.replies import REPLIES, Reply
from benchmarks.scenario import Scenario
from benchmarks.table import Column, Table, quoted, table
from benchmarks.tokens import tokenize
from voice_membrane.bench.stats import median, nearest_rank

FAST_FIRST_TOKENS = 5  # "first piece within N tokens" share reported in the table
LATE_FIRST_TOKENS = 10  # a first piece later than this is listed as a finding
SWEEP_FIRST_CHUNK_WORDS = (3, 4, 5, 6)


class Piece(Protocol):
    @property
    def text(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


class Splitter(Protocol):
    def feed(self, text: str) -> Sequence[Piece]: ...
    def flush(self) -> Sequence[Piece]: ...


@dataclass(frozen=True, slots=True)
class ReplyRun:
    """What one splitter did with one reply.

    ``first_token`` is 1-based; when only ``flush()`` released the first piece it is
    ``tokens + 1`` and ``first_by_flush`` is set.
    """

    reply: Reply
    tokens: int
    first_token: int
    first_by_flush: bool
    first_text: str
    pieces: tuple[tuple[str, int, int], ...]  # (text, start, end)
    hazard_cuts: tuple[tuple[int, str], ...]  # (cut offset, hazard text it fell inside)
    first_cut_in_hazard: bool  # the first piece itself ended inside a hazard span
    bad_offsets: bool  # a piece's (start, end) does not cover its own text
    content_changed: bool  # the pieces say letters or digits the reply does not, in order
    dropped: int  # letters and digits of the reply no piece says (markdown removal)
    unspeakable: tuple[str, ...] = ()  # markup, URL syntax or symbols the pieces say


@dataclass(frozen=True, slots=True)
class Summary:
    label: str
    replies: int
    median_tokens: float
    p90_tokens: float
    max_tokens: float
    within_fast: float
    first_cut_in_hazard: int  # replies whose first piece was bought with a hazard split
    median_first_chars: float
    flush_only: int
    hazard_splits: int
    replies_with_hazard_split: int


@dataclass(frozen=True, slots=True)
class ChunkerResults:
    comparison: list[Summary]  # ours (default) then the baselines
    sweep: list[Summary]  # ours at each first_chunk_words
    runs: dict[str, list[ReplyRun]]  # per label, for the findings section


def _alnum(text: str) -> str:
    # Letters and digits only: tolerant of whitespace trimming and markdown stripping.
    return "".join(ch for ch in text if ch.isalnum())


def _is_subsequence(needle: str, haystack: str) -> bool:
    rest = iter(haystack)
    return all(ch in rest for ch in needle)  # ``in`` consumes the iterator up to a match


# What a voice must never be given: table pipes, emphasis, URL syntax, symbols.
_UNSPEAKABLE = re.compile(
    r"^[ \t]*\||\*\*|`|://|www\.|@|^\s*#+ |[\u2190-\u21ff\u2500-\u27bf\u2b00-\u2bff\ufe0f\u200d]"
    r"|[\U0001f000-\U0001faff]",
    re.MULTILINE,
)


def _unspeakable(text: str) -> list[str]:
    return [m.group() for m in _UNSPEAKABLE.finditer(text)]


def _cuts(pieces: Sequence[tuple[str, int, int]]) -> set[int]:
    """Offsets where one piece ends and the next begins (both ends, in case they differ)."""
    cuts = {end for _, _, end in pieces[:-1]}
    cuts.update(start for _, start, _ in pieces[1:])
    return cuts


def run_reply(splitter: Splitter, reply: Reply) -> ReplyRun:
    tokens = tokenize(reply.text)
    assert "".join(tokens) == reply.text, "the tokenizer must not lose characters"
    pieces: list[tuple[str, int, int]] = []
    first_token = 0
    for index, token in enumerate(tokens, start=1):
        released = splitter.feed(token)
        if released and not first_token:
            first_token = index
        pieces.extend((p.text, p.start, p.end) for p in released)
    flushed = splitter.flush()
    pieces.extend((p.text, p.start, p.end) for p in flushed)
    first_by_flush = not first_token
    if first_by_flush:
        first_token = len(tokens) + 1

    spans = reply.hazard_spans()
    hazard_cuts = tuple(
        (cut, reply.text[start:end])
        for cut in sorted(_cuts(pieces))
        for start, end in spans
        if start < cut < end
    )
    first_end = pieces[0][2] if len(pieces) > 1 else -1  # a lone piece makes no cut
    first_cut_in_hazard = any(cut == first_end for cut, _ in hazard_cuts)
    # Subsequences, not equality: the chunker may remove markdown (a link's URL) from
    # what it says, but may not invent, reorder or misplace anything. A reply with
    # ``said`` is rewritten on purpose (a table row said with its headers), so each
    # piece's text need not come from its own span.
    bad_offsets = any(
        not 0 <= start <= end <= len(reply.text)
        or (reply.said is None and not _is_subsequence(_alnum(text), _alnum(reply.text[start:end])))
        for text, start, end in pieces
    )
    said = "".join(text for text, _, _ in pieces)
    spoken = _alnum(said)
    reference = _alnum(reply.text if reply.said is None else reply.said)
    content_changed = not _is_subsequence(spoken, reference)
    return ReplyRun(
        reply=reply,
        tokens=len(tokens),
        first_token=first_token,
        first_by_flush=first_by_flush,
        first_text=pieces[0][0] if pieces else "",
        pieces=tuple(pieces),
        hazard_cuts=hazard_cuts,
        first_cut_in_hazard=first_cut_in_hazard,
        bad_offsets=bad_offsets,
        content_changed=content_changed,
        dropped=len(reference) - len(spoken),
        unspeakable=tuple(_unspeakable(said)),
    )


def run_corpus(make: Callable[[], Splitter], replies: Sequence[Reply]) -> list[ReplyRun]:
    """A fresh splitter per reply, as each reply is a new utterance."""
    return [run_reply(make(), reply) for reply in replies]


def summarize(label: str, runs: Sequence[ReplyRun]) -> Summary:
    firsts = [run.first_token for run in runs]
    return Summary(
        label=label,
        replies=len(runs),
        median_tokens=median(firsts),
        p90_tokens=nearest_rank(firsts, 0.9),
        max_tokens=max(firsts),
        within_fast=sum(n <= FAST_FIRST_TOKENS for n in firsts) / len(firsts),
        first_cut_in_hazard=sum(run.first_cut_in_hazard for run in runs),
        median_first_chars=median([len(run.first_text.strip()) for run in runs]),
        flush_only=sum(run.first_by_flush for run in runs),
        hazard_splits=sum(len(run.hazard_cuts) for run in runs),
        replies_with_hazard_split=sum(bool(run.hazard_cuts) for run in runs),
    )


OURS_LABEL = "voice_membrane SpeechChunker (default)"
SENTENCE_LABEL = "baseline: sentence-only"
MIN20_LABEL = "baseline: min-20-chars sentence"


def sweep_label(words: int) -> str:
    return f"SpeechChunker(first_chunk_words={words})"


def run_chunker_bench(replies: Sequence[Reply] = REPLIES) -> ChunkerResults:
    # Imported here so the parser benchmark still runs while the chunker is missing.
    from voice_membrane.chunking import SpeechChunker

    makers: dict[str, Callable[[], Splitter]] = {
        OURS_LABEL: SpeechChunker,
        SENTENCE_LABEL: SentenceSplitter,
        MIN20_LABEL: partial(SentenceSplitter, min_first_chars=20),
    }
    for words in SWEEP_FIRST_CHUNK_WORDS:
        makers[sweep_label(words)] = partial(SpeechChunker, first_chunk_words=words)

    runs = {label: run_corpus(make, replies) for label, make in makers.items()}
    summaries = {label: summarize(label, label_runs) for label, label_runs in runs.items()}
    return ChunkerResults(
        comparison=[summaries[OURS_LABEL], summaries[SENTENCE_LABEL], summaries[MIN20_LABEL]],
        sweep=[summaries[sweep_label(words)] for words in SWEEP_FIRST_CHUNK_WORDS],
        runs=runs,
    )


CHUNKER_TITLE = title("chunker")
EXAMPLE_TAGS = ("interjection", "long-opening", "abbrev", "time", "price", "list")
MAX_FINDINGS = 20  # lines in all, so a badly broken chunker cannot flood the page
SUMMARY: Table[Summary] = Table(
    [
        Column("Splitter", lambda s: s.label),
        Column("tokens to 1st piece: median", lambda s: f"{s.median_tokens:g}"),
        Column("p90", lambda s: f"{s.p90_tokens:g}"),
        Column("max", lambda s: f"{s.max_tokens:g}"),
        Column(f"≤ {FAST_FIRST_TOKENS} tokens", lambda s: f"{s.within_fast:.0%}"),
        Column("1st piece chars (median)", lambda s: f"{s.median_first_chars:g}"),
        Column("only at flush()", lambda s: s.flush_only),
        Column(
            "hazard splits (replies)",
            lambda s: f"{s.hazard_splits} ({s.replies_with_hazard_split})",
        ),
        Column("1st piece ends in a hazard", lambda s: s.first_cut_in_hazard),
    ]
)


def _examples(results: ChunkerResults) -> str:
    """The first reply of a few categories, to show the shapes side by side."""
    rows: list[list[object]] = []
    for tag in EXAMPLE_TAGS:
        i = next(i for i, r in enumerate(REPLIES) if r.tag == tag)
        runs = [results.runs[label][i] for label in (OURS_LABEL, SENTENCE_LABEL, MIN20_LABEL)]
        rows.append(
            [
                quoted(REPLIES[i].text, 48),
                *(f"{quoted(r.first_text, 40)} @{r.first_token}" for r in runs),
            ]
        )
    return table(["Reply", "ours", "sentence-only", "min-20-chars"], rows)


def chunker_section(results: ChunkerResults) -> str:
    return prose(
        "chunker",
        replies=len(REPLIES),
        tokens=sum(len(tokenize(r.text)) for r in REPLIES),
        spans=sum(len(r.hazard_spans()) for r in REPLIES),
        comparison=SUMMARY.render(results.comparison),
        sweep=SUMMARY.render(results.sweep),
        examples=_examples(results),
    )


def _pieces(run: ReplyRun) -> str:
    return " · ".join(quoted(text) for text, _, _ in run.pieces)


def _short(label: str) -> str:
    return "default" if label == OURS_LABEL else label.removeprefix("SpeechChunker(")[:-1]


def _settings(labels: Sequence[str], every: Sequence[str]) -> str:
    if list(labels) == list(every):
        return "all settings"
    return ", ".join(_short(label) for label in labels)


def findings(results: ChunkerResults) -> list[str]:
    """Cases worth a look in the library's chunker (the baselines' flaws are expected).

    Hazard splits are grouped per reply, naming every setting that made them, so one
    bad rule does not fill the page once per ``first_chunk_words`` value.
    """
    ours = [label for label in results.runs if label not in (SENTENCE_LABEL, MIN20_LABEL)]
    lines: list[str] = []
    for index, run in enumerate(results.runs[OURS_LABEL]):
        text = quoted(run.reply.text)
        reply = f"{text} → {_pieces(run)}"
        if run.first_by_flush or run.first_token > LATE_FIRST_TOKENS:
            when = "only at flush()" if run.first_by_flush else f"at token {run.first_token}"
            lines.append(prose("chunker#late", when=when, tokens=run.tokens, reply=reply))
        if splitting := [label for label in ours if results.runs[label][index].hazard_cuts]:
            cuts = [h for label in splitting for _, h in results.runs[label][index].hazard_cuts]
            hazard = prose(
                "chunker#hazard",
                hazards=", ".join(quoted(h) for h in dict.fromkeys(cuts)),
                settings=_settings(splitting, ours),
                text=text,
                pieces=_pieces(results.runs[splitting[0]][index]),
                setting=_short(splitting[0]),
            )
            lines.append(hazard)
        if run.bad_offsets:
            spans = ", ".join(f"{quoted(t)}[{s}:{e}]" for t, s, e in run.pieces)
            lines.append(prose("chunker#offsets", text=text, spans=spans))
        if run.unspeakable:
            said = ", ".join(quoted(u) for u in dict.fromkeys(run.unspeakable))
            lines.append(prose("chunker#unspeakable", said=said, reply=reply))
        if run.content_changed:
            lines.append(prose("chunker#changed", reply=reply))
        elif run.dropped:
            lines.append(prose("chunker#dropped", dropped=run.dropped, reply=reply))
    if len(lines) > MAX_FINDINGS:
        lines = [*lines[:MAX_FINDINGS], f"- … and {len(lines) - MAX_FINDINGS} more"]
    return lines


def findings_section(results: ChunkerResults) -> str:
    lines = "\n".join(findings(results)) or "- none"
    return prose("chunker#findings", late=LATE_FIRST_TOKENS, lines=lines)


SCENARIO = Scenario(
    "chunker",
    (CHUNKER_TITLE,),
    run_chunker_bench,
    lambda r: [chunker_section(r), findings_section(r)],
)
