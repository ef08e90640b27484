"""Membrane benchmark: what the adapters and ``Membrane`` add per streamed delta over
each vendor's SDK, measured by ``voice_membrane.bench.membrane_cost`` (its docstring
has the method) on one long reply — a thinking block and a few thousand characters
of text from the reply corpus, and a tool call — cut into ``DELTA_CHARS``-character
deltas; and, by ``voice_membrane.bench.request_cost``, how long each adapter takes
from ``stream()`` to handing its request to HTTP, by the conversation's length.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from benchmarks.replies import REPLIES
from voice_membrane.bench.membrane_cost import MembraneResults, run_membrane_cost
from voice_membrane.bench.membrane_reply import build_reply
from voice_membrane.bench.request_cost import LENGTHS, run_request_cost

DELTA_CHARS = 4
TEXT_CHARS = 4_000
THINKING_CHARS = 1_000
REPEATS = 11
SEND_CALLS = 100  # calls per repetition of the before-the-first-byte measurement
SEND_REPEATS = 5
VENDORS = ("anthropic", "openai", "gemini")


def run_membrane_bench(
    text_chars: int = TEXT_CHARS,
    thinking_chars: int = THINKING_CHARS,
    repeats: int = REPEATS,
    vendors: Sequence[str] = VENDORS,
    send_calls: int = SEND_CALLS,
    send_repeats: int = SEND_REPEATS,
) -> MembraneResults:
    # The corpus has no ``<`` or ``&``: the reply's XML form needs no escaping.
    corpus = [reply.text for reply in REPLIES]
    reply = build_reply(corpus, text_chars, thinking_chars, DELTA_CHARS)
    results = run_membrane_cost(reply, repeats, vendors)
    before_send = run_request_cost(vendors, LENGTHS, send_calls, send_repeats)
    return dataclasses.replace(results, before_send=tuple(before_send))
