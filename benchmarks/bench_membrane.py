"""Membrane benchmark: what the adapters and ``Membrane`` add per streamed delta over
each vendor's SDK, measured by ``voice_membrane.bench.membrane_cost`` (its docstring
has the method) on one long reply — a thinking block and a few thousand characters
of text from the reply corpus, and a tool call — cut into ``DELTA_CHARS``-character
deltas.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.replies import REPLIES
from voice_membrane.bench.membrane_cost import MembraneResults, run_membrane_cost
from voice_membrane.bench.membrane_reply import build_reply

DELTA_CHARS = 4
TEXT_CHARS = 4_000
THINKING_CHARS = 1_000
REPEATS = 11
VENDORS = ("anthropic", "openai", "gemini")


def run_membrane_bench(
    text_chars: int = TEXT_CHARS,
    thinking_chars: int = THINKING_CHARS,
    repeats: int = REPEATS,
    vendors: Sequence[str] = VENDORS,
) -> MembraneResults:
    # The corpus has no ``<`` or ``&``: the reply's XML form needs no escaping.
    corpus = [reply.text for reply in REPLIES]
    reply = build_reply(corpus, text_chars, thinking_chars, DELTA_CHARS)
    return run_membrane_cost(reply, repeats, vendors)
