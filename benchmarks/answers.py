"""Answers of the embedded model to the shipped questions (spoken, typed, in other
languages), each in a fresh conversation with the pipeline's ``[llm]`` settings,
under fixed seeds, the settings shipped before issue 43 beside the shipped ones;
each reply measured by ``answer_shape`` (``sections/answers.md``). One llama.cpp
thread: the replies, not the speed, are measured. ``python -m
benchmarks.answers [--seeds N]`` runs it alone and prints its section."""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path

import anyio

from benchmarks.answer_shape import Shape, shape
from benchmarks.prose import prose, title
from benchmarks.scenario import Scenario
from benchmarks.table import Column, Table, quoted, table
from voice_membrane.bench.prompts import DEFAULT_PROMPTS, WARM_UP_PROMPT
from voice_membrane.bench.stats import Spread
from voice_membrane.pipeline.config import DEFAULT_PIPELINE, LlmConfig, load_pipeline
from voice_membrane.providers.base import ChatMessage
from voice_membrane.providers.local_llama import LocalLlama
from voice_membrane.providers.registry import create_provider
from voice_membrane.providers.text_source import TextSourceProvider

ROOT = Path(__file__).resolve().parent.parent
SEEDS = (1, 2, 3)
# Typed questions in the chunker's other languages: the answer should be in theirs.
OTHER_LANGUAGES = (
    ("fr", "Quelle est la capitale de la France ?"),
    ("fr", "Pourquoi le ciel est-il bleu ?"),
    ("es", "¿Cuál es la capital de España?"),
    ("es", "¿Por qué el cielo es azul?"),
    ("de", "Warum ist der Himmel blau?"),
    ("de", "Wie weit ist der Mond entfernt?"),
)
# The [llm] settings pipelines/local.toml and local-voice.toml shipped before issue 43
# (the default system prompt was LocalLlama's, llama.cpp's sampling defaults).
BEFORE_LABEL = "before issue 43"
BEFORE = {
    "system_prompt": "You are a friendly voice assistant. Answer in one to three short "
    "spoken sentences, without lists or markdown.",
    "max_tokens": 200,
    "temperature": 0.3,
    "top_p": 0.9,
    "top_k": 40,
    "min_p": 0.05,
    "repeat_penalty": 1.0,
    "stop": (),
    "max_sentences": 0,
}


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    language: str  # the language it is asked in (and should be answered in)
    kind: str  # "spoken", "typed" or "other language"


@dataclass(frozen=True, slots=True)
class Answer:
    question: Question
    seed: int
    text: str
    shape: Shape


@dataclass
class SettingRun:
    label: str
    llm: LlmConfig
    answers: list[Answer]
    seconds: float


@dataclass
class AnswersResults:
    runs: list[SettingRun]
    seeds: tuple[int, ...]


def questions() -> list[Question]:
    """The shipped questions, each once."""
    index = json.loads((ROOT / "audio_fixtures" / "speech" / "index.json").read_text())
    spoken = sorted({e["text"] for k, e in index.items() if not k.startswith("backchannels/")})
    make = re.search(r"^PROMPT \?= (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    typed = ([make.group(1).strip()] if make else []) + [WARM_UP_PROMPT, *DEFAULT_PROMPTS]
    return (
        [Question(text, "en", "spoken") for text in spoken]
        + [Question(text, "en", "typed") for text in dict.fromkeys(typed)]
        + [Question(text, code, "other language") for code, text in OTHER_LANGUAGES]
    )


def shipped_llm() -> LlmConfig:
    """The [llm] section of the default pipeline (local-voice.toml's is the same)."""
    return load_pipeline(DEFAULT_PIPELINE).llm


def before_llm() -> LlmConfig:
    return shipped_llm().model_copy(update=BEFORE)


async def answer(source: LocalLlama, llm: LlmConfig, text: str, seed: int) -> str:
    """One reply, in a fresh conversation, the way a session asks for it."""
    source.seed = seed
    system = [ChatMessage("system", llm.system_prompt)] if llm.system_prompt else []
    parts: list[str] = []
    async with aclosing(source.stream([*system, ChatMessage("user", text)])) as deltas:
        async for delta in deltas:
            parts.append(delta)
    return "".join(parts)


def local_source(llm: LlmConfig, n_threads: int = 1) -> LocalLlama:
    """The embedded model as ``build_parts`` makes it from ``llm``."""
    provider, _ = create_provider(
        llm.spec,
        model_path=llm.model_path,
        n_threads=n_threads,
        max_tokens=llm.max_tokens,
        temperature=llm.temperature,
        sampling=llm.sampling(),
    )
    assert isinstance(provider, TextSourceProvider) and isinstance(provider.source, LocalLlama)
    return provider.source


async def _run(
    label: str, llm: LlmConfig, asked: Sequence[Question], seeds: Sequence[int]
) -> SettingRun:
    source = local_source(llm)
    await source.start()
    started = time.perf_counter()
    answers = []
    for question in asked:
        for seed in seeds:
            text = await answer(source, llm, question.text, seed)
            answers.append(Answer(question, seed, text, shape(text)))
    return SettingRun(label, llm, answers, time.perf_counter() - started)


def run_answers_bench(seeds: Sequence[int] = SEEDS) -> AnswersResults:
    asked = questions()
    runs = [
        anyio.run(_run, BEFORE_LABEL, before_llm(), asked, seeds),
        anyio.run(_run, "shipped", shipped_llm(), asked, seeds),
    ]
    return AnswersResults(runs, tuple(seeds))


ANSWERS_TITLE = title("answers")
KINDS = ("spoken", "typed", "other language")
EXAMPLES = (
    "what is the weather in paris today",
    "tell me a joke",
    "Pourquoi le ciel est-il bleu ?",
)
EXAMPLE_CHARS = 160
Test = Callable[[Answer], bool]


def _share(answers: Sequence[Answer], test: Test) -> str:
    return f"{100 * sum(map(test, answers)) / len(answers):.0f} %"


def _seeds(answers: Sequence[Answer], test: Test) -> str:
    """The share per seed, lowest-highest."""
    by_seed = [[a for a in answers if a.seed == seed] for seed in sorted({a.seed for a in answers})]
    shares = [100 * sum(map(test, mine)) / len(mine) for mine in by_seed]
    return f"{min(shares):.0f}-{max(shares):.0f}"


def _in_language(a: Answer) -> bool:
    return a.shape.language == a.question.language


def _one_or_two(a: Answer) -> bool:
    return a.shape.one_or_two


Row = tuple[str, str, list[Answer]]  # a setting's label, a kind of question, its answers
_WORDS = Spread(("median", "max"))
TABLE: Table[Row] = Table(
    [
        Column("Settings", lambda r: r[0]),
        Column("questions", lambda r: r[1]),
        Column("replies", lambda r: len(r[2])),
        Column("in its language", lambda r: _share(r[2], _in_language)),
        Column("seeds", lambda r: _seeds(r[2], _in_language)),
        Column("ends a sentence", lambda r: _share(r[2], lambda a: a.shape.finished)),
        Column("1-2 sentences", lambda r: _share(r[2], _one_or_two)),
        Column("seeds", lambda r: _seeds(r[2], _one_or_two)),
        Column("looping", lambda r: _share(r[2], lambda a: a.shape.repeats > 0)),
        Column(
            "repeated 4-grams", lambda r: f"{sum(a.shape.repeats for a in r[2]) / len(r[2]):.1f}"
        ),
        Column("words", lambda r: _WORDS.cell([float(a.shape.words) for a in r[2]])),
    ]
)


def _rows(run: SettingRun) -> list[Row]:
    by_kind = [(kind, [a for a in run.answers if a.question.kind == kind]) for kind in KINDS]
    return [(run.label, kind, got) for kind, got in by_kind if got]


def _settings(run: SettingRun) -> str:
    prompt = quoted(run.llm.system_prompt) if run.llm.system_prompt else "LocalLlama's default"
    return prose(
        "answers#settings",
        label=run.label,
        prompt=prompt,
        llm=run.llm,
        stop=list(run.llm.stop),
        seconds=run.seconds,
    )


def _examples(results: AnswersResults) -> str:
    seed = results.seeds[0]
    rows = []
    for text in EXAMPLES:
        said = [
            next((a.text for a in run.answers if a.question.text == text and a.seed == seed), "")
            for run in results.runs
        ]
        rows.append([quoted(text), *(quoted(s.strip(), EXAMPLE_CHARS) for s in said)])
    return table([f"Question (seed {seed})", *(run.label for run in results.runs)], rows)


def answers_section(results: AnswersResults) -> str:
    return prose(
        "answers",
        seeds=", ".join(map(str, results.seeds)),
        settings=" ".join(_settings(run) for run in results.runs),
        table=TABLE.render([row for run in results.runs for row in _rows(run)]),
        examples=_examples(results),
    )


SCENARIO = Scenario(
    "answers", (ANSWERS_TITLE,), run_answers_bench, lambda r: [answers_section(r)], True
)

if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="The embedded model's answers to the shipped questions."
    )
    parser.add_argument("--seeds", type=int, default=len(SEEDS), help="how many seeds (1, 2, …)")
    print(answers_section(run_answers_bench(tuple(range(1, parser.parse_args().seeds + 1)))))
