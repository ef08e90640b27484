"""Answers of the embedded model: their language, length, ending and loops.

The shipped questions — the spoken ones (``audio_fixtures/speech/index.json``'s
texts, the barge-in backchannels left out), the typed ones (``make run``'s prompt,
the bench's default prompts and its warm-up) and a few typed in other languages —
are asked of the embedded model one at a time, each in a fresh conversation, as
the pipeline runs it (``create_provider`` with the pipeline file's ``[llm]``
settings: system prompt, sampling, sentence limit, max tokens), under several
fixed seeds. Each reply is measured by ``answer_shape`` (sans-I/O). The settings
the pipelines shipped before issue 43 are run beside the shipped ones.

``python -m benchmarks.report_answers [--seeds N]`` runs it alone and prints its
section. One llama.cpp thread: the replies, not the speed, are measured.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path

import anyio

from benchmarks.answer_shape import Shape, shape
from voice_membrane.bench.prompts import DEFAULT_PROMPTS, WARM_UP_PROMPT
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
