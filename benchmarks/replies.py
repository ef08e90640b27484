"""The reply corpus of the chunker and parser benchmarks: hand-written voice-assistant
replies (``replies.json``, in groups, each saying what its replies test), each
annotated with its hazard spans.

A *hazard span* is a stretch of text that must reach the TTS engine in one piece: a cut
inside ``3.14``, ``Dr. Patel`` or ``support@example.com`` makes the voice pause or
mispronounce. Spans are written as substrings and located in the reply (every
occurrence counts). An abbreviation in mid-sentence includes the word after it, since
the dangerous cut is the one *after* its period (``Dr.| Patel``); one that really ends
a sentence (``…and so on, etc.``) is not a hazard there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).with_name("replies.json")
_FIELDS = {"tag", "text", "hazards", "said"}


@dataclass(frozen=True, slots=True)
class Reply:
    """One assistant reply, its category, and the substrings no chunk cut may fall inside.

    ``said`` is what the voice should be given when the chunker rewrites the reply
    beyond removing markup (an e-mail address said with "at", a table row said with
    its headers); None when the pieces say a subsequence of the reply's own text.
    """

    tag: str
    text: str
    hazards: tuple[str, ...] = ()
    said: str | None = None

    def hazard_spans(self) -> list[tuple[int, int]]:
        """Every ``(start, end)`` occurrence of every hazard substring in ``text``."""
        spans: list[tuple[int, int]] = []
        for hazard in self.hazards:
            start = self.text.find(hazard)
            if start < 0:
                raise ValueError(f"hazard {hazard!r} not found in reply {self.text[:40]!r}")
            while start >= 0:
                spans.append((start, start + len(hazard)))
                start = self.text.find(hazard, start + 1)
        return sorted(spans)


def _reply(entry: dict[str, Any]) -> Reply:
    unknown = set(entry) - _FIELDS
    if unknown:  # a misspelt "hazard" would silently check nothing
        raise ValueError(f"{CORPUS.name}: unknown fields {sorted(unknown)} in {entry}")
    return Reply(entry["tag"], entry["text"], tuple(entry.get("hazards", ())), entry.get("said"))


def load_replies(path: Path = CORPUS) -> tuple[Reply, ...]:
    """The corpus in file order (the parser's stream draws from it by index, seeded)."""
    groups: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return tuple(_reply(entry) for group in groups for entry in group["replies"])


REPLIES = load_replies()
