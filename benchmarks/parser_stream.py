"""A deterministic ~1 MB prefill-mode stream for the parser benchmark, from a seeded
``random.Random`` (the same on every machine): visible text (paragraphs of the reply
corpus), ``<thinking>`` blocks, ``<function_calls>`` with one or two invokes and the
``<function_results>`` answering them, kept beside what each block should yield.

Two hazards are built in, so the benchmark's output check covers them: every third
text block ends with no whitespace right before a hidden block, and when calls and
results come next, the next text block starts right after ``</function_results>``
(``ok.<function_calls>…</function_calls>\n<function_results>…</function_results>Sure``:
only the whitespace between the hidden blocks separates the words, and must survive);
the stream ends inside the closer of a last ``<function_calls>`` (``…</invoke>\n</function_ca``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from benchmarks.replies import REPLIES

SEED = 20240521
DEFAULT_TARGET_CHARS = 1_000_000

# Thinking and tool text come from this small vocabulary: the parser does not care what
# the words mean, only that their lengths and spacing look like English.
_VOCABULARY = (
    "the user wants to know whether it will rain tomorrow so I should check forecast first "
    "then answer briefly they asked about trains earlier maybe mention timetable also "
    "consider time zone difference calendar has meeting at noon which might conflict "
    "need confirm location before calling search tool results look consistent with "
    "previous answer keep reply short friendly avoid reading long numbers aloud summary "
    "price range seems reasonable compare two options pick cheaper one unless slower"
)
_WORDS = tuple(_VOCABULARY.split())

_TOOLS: dict[str, tuple[str, ...]] = {
    "search": ("query", "max_results"),
    "get_weather": ("city", "units", "days"),
    "calendar_lookup": ("date", "calendar_id"),
    "send_message": ("to", "body"),
    "convert_currency": ("amount", "from", "to"),
}

# Segment odds, tuned so that by characters no block kind dominates the stream.
_SEGMENT_WEIGHTS = {"text": 0.5, "thinking": 0.25, "tools": 0.25}


@dataclass(frozen=True, slots=True)
class MixedStream:
    """The wire text, split one string per block, and what each block should yield."""

    blocks: tuple[tuple[str, str], ...]  # (kind, wire text), kind as in voice_membrane.events
    text_blocks: tuple[str, ...]
    top_level_text: str  # all the wire text outside hidden blocks, whitespace included
    thinking_blocks: tuple[str, ...]
    invokes: int
    results: int

    @property
    def wire(self) -> str:
        return "".join(wire for _, wire in self.blocks)

    def chars_by_kind(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for kind, wire in self.blocks:
            totals[kind] = totals.get(kind, 0) + len(wire)
        return totals


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 18))]
    return " ".join(words).capitalize() + rng.choice((".", ".", ".", "?"))


def _paragraph(rng: random.Random) -> str:
    return " ".join(rng.choice(REPLIES).text for _ in range(rng.randint(3, 6)))


def _thinking(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(2, 8)))


def _parameter_value(rng: random.Random, name: str) -> str:
    if name in ("max_results", "days", "amount"):
        return str(rng.randint(1, 500))
    if name == "body":
        return _sentence(rng)
    if rng.random() < 0.2:  # some models pass JSON objects as parameter values
        return json.dumps({"value": rng.choice(_WORDS), "exact": rng.random() < 0.5})
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))


def _invoke(rng: random.Random) -> str:
    tool = rng.choice(sorted(_TOOLS))
    params = _TOOLS[tool][: rng.randint(1, len(_TOOLS[tool]))]
    lines = [f'<invoke name="{tool}">']
    lines += [f'<parameter name="{p}">{_parameter_value(rng, p)}</parameter>' for p in params]
    lines.append("</invoke>")
    return "\n".join(lines)


def _result_content(rng: random.Random) -> str:
    if rng.random() < 0.5:
        rows = [
            {"title": _sentence(rng), "score": round(rng.random(), 3), "rank": i}
            for i in range(1, rng.randint(2, 4))
        ]
        return json.dumps({"results": rows})
    return "\n".join(_sentence(rng) for _ in range(rng.randint(1, 5)))


def build_stream(target_chars: int = DEFAULT_TARGET_CHARS, seed: int = SEED) -> MixedStream:
    rng = random.Random(seed)
    blocks: list[tuple[str, str]] = []
    text_blocks: list[str] = []
    thinking_blocks: list[str] = []
    top_level: list[str] = []
    glued = False
    invokes = 0
    results = 0
    size = 0
    previous = ""
    while size < target_chars:
        # Two text segments in a row would just be one longer text block.
        choices = [kind for kind in _SEGMENT_WEIGHTS if not (kind == previous == "text")]
        kind = rng.choices(choices, weights=[_SEGMENT_WEIGHTS[c] for c in choices])[0]
        previous = kind
        new: list[tuple[str, str]] = []
        if kind == "text":
            paragraph = _paragraph(rng)
            if glued and blocks[-1][0] == "tool_result":
                # The previous text block was glued to the hidden blocks after it: glue
                # this one to the hidden block before it, so the only separator left is
                # the whitespace between </function_calls> and <function_results>.
                blocks[-1] = ("tool_result", blocks[-1][1].rstrip("\n"))
                top_level.pop()
            # Every third text block is glued to the hidden block after it.
            glued = len(text_blocks) % 3 == 1
            wire = paragraph if glued else paragraph + "\n\n"
            text_blocks.append(paragraph)
            top_level.append(wire)
            new.append(("text", wire))
        elif kind == "thinking":
            thought = _thinking(rng)
            thinking_blocks.append(thought)
            new.append(("thinking", f"<thinking>\n{thought}\n</thinking>\n"))
            top_level.append("\n")
        else:
            count = rng.randint(1, 2)
            calls = "\n".join(_invoke(rng) for _ in range(count))
            new.append(("tool_call", f"<function_calls>\n{calls}\n</function_calls>\n"))
            # The parser numbers invokes from 1 as toolu_xml_<n>; answer those ids.
            answers = "\n".join(
                f'<result tool_use_id="toolu_xml_{invokes + i}">{_result_content(rng)}</result>'
                for i in range(1, count + 1)
            )
            new.append(("tool_result", f"<function_results>\n{answers}\n</function_results>\n"))
            top_level += ["\n", "\n"]  # after </function_calls>, after </function_results>
            invokes += count
            results += count
        blocks.extend(new)
        size += sum(len(wire) for _, wire in new)
    # A reply cut off inside the closer of its last tool calls.
    count = rng.randint(1, 2)
    calls = "\n".join(_invoke(rng) for _ in range(count))
    blocks.append(("tool_call", f"<function_calls>\n{calls}\n</function_ca"))
    invokes += count
    return MixedStream(
        tuple(blocks),
        tuple(text_blocks),
        "".join(top_level),
        tuple(thinking_blocks),
        invokes,
        results,
    )
