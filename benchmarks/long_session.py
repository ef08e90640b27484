"""Long embedded session: the first token of turns that drop old turns, with the
KV cache trimmed in place against the old path (the whole prompt read again), on
the embedded SmolLM2 with a silent TTS engine (``sections/long-session.md``).
``python -m benchmarks.long_session`` runs it alone and prints its section."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario
from benchmarks.table import Column, Table
from voice_membrane.bench.stats import Spread
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.pipeline.history import SourceTokens
from voice_membrane.pipeline.session import Session
from voice_membrane.providers.llama_kv import evaluated_tokens
from voice_membrane.providers.local_llama import LocalLlama
from voice_membrane.providers.text_source import TextSourceProvider
from voice_membrane.sinks.null import NullSink
from voice_membrane.testing.silent_engine import SilentEngine

TURNS = 40
REPLY_TOKENS = 32
N_CTX = 2048
TOPICS = ("the moon", "tea", "bicycles", "rain", "owls", "bread", "trains", "music", "maps")
# Long enough that the context fills in about twenty turns (a trim every five or so).
SAID = (
    "Turn {n}: I was thinking about {topic} today, on the long walk home through the "
    "park in the evening light, and I wondered about it. Tell me one short fact about "
    "{topic}, please, in a single sentence."
)


@dataclass
class TurnFigures:
    first_token_ms: float
    trimmed: bool
    evaluated: int  # tokens llama.cpp evaluated: the prompt's new part and the reply
    prompt_tokens: int


@dataclass
class ModeRun:
    in_place: bool
    turns: list[TurnFigures] = field(default_factory=list)
    seconds: float = 0.0

    def first_token_ms(self, trimmed: bool) -> list[float]:
        return [t.first_token_ms for t in self.turns if t.trimmed == trimmed]

    def evaluated(self, trimmed: bool) -> list[int]:
        return [t.evaluated for t in self.turns if t.trimmed == trimmed]


@dataclass
class LongSessionResults:
    runs: list[ModeRun]
    turns: int
    reply_tokens: int
    budget: int


async def _session(in_place: bool, turns: int, log: Callable[[str], None]) -> ModeRun:
    source = LocalLlama(
        n_ctx=N_CTX, max_tokens=REPLY_TOKENS, temperature=0.0, seed=0, trim_in_place=in_place
    )
    await source.start()
    membrane = Membrane(TextSourceProvider(source))
    run = ModeRun(in_place)
    started = time.perf_counter()
    async with Session(
        membrane, SilentEngine(), NullSink(), context=SourceTokens(source, membrane.formatter)
    ) as session:
        dropped = 0
        for n in range(turns):
            before = evaluated_tokens(source.model.llama)
            result = await session.turn(SAID.format(n=n, topic=TOPICS[n % len(TOPICS)]))
            fitted = result.report.context
            first = result.report.stamps_ms.get("first_token")
            if result.error is not None or fitted is None or first is None:
                raise RuntimeError(f"turn {n} failed: {result.error}")
            trimmed = fitted.dropped > dropped
            dropped = fitted.dropped
            evaluated = evaluated_tokens(source.model.llama) - before
            run.turns.append(TurnFigures(first, trimmed, evaluated, fitted.tokens))
            if trimmed:
                log(f"  turn {n}: trimmed, first token {first:.0f} ms, {evaluated} evaluated")
    run.seconds = time.perf_counter() - started
    return run


def run_long_session_bench(
    turns: int = TURNS, log: Callable[[str], None] = print
) -> LongSessionResults:
    runs = []
    for in_place in (False, True):
        log(f"long session, {'in-place trim' if in_place else 'full re-read'}: {turns} turns")
        runs.append(anyio.run(_session, in_place, turns, log))
    budget = LocalLlama(n_ctx=N_CTX, max_tokens=REPLY_TOKENS).context_tokens
    return LongSessionResults(runs, turns, REPLY_TOKENS, budget)


LONG_SESSION_TITLE = title("long-session")
_MS, _MEDIAN = Spread(("median", "max")), Spread(("median",))
TABLE: Table[ModeRun] = Table(
    [
        Column("Mode", lambda r: "trimmed in place" if r.in_place else "read again (old path)"),
        Column("untrimmed turns", lambda r: _MS.cell(r.first_token_ms(False))),
        Column("trimmed turns", lambda r: _MS.cell(r.first_token_ms(True))),
        Column("trims", lambda r: len(r.first_token_ms(True))),
        Column("evaluated (trimmed, p50)", lambda r: _MEDIAN.cell(r.evaluated(True))),
        Column("run", lambda r: f"{r.seconds:.0f} s"),
    ]
)


def long_session_section(results: LongSessionResults) -> str:
    return prose(
        "long-session",
        reply_tokens=results.reply_tokens,
        budget=results.budget,
        turns=results.turns,
        table=TABLE.render(results.runs),
    )


SCENARIO = Scenario(
    "long-session",
    (LONG_SESSION_TITLE,),
    run_long_session_bench,
    lambda r: [long_session_section(r)],
    True,
)

if __name__ == "__main__":
    print(long_session_section(run_long_session_bench()))
