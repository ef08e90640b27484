"""The embedded model's answers (issue 43, item 4): the [llm] settings that shape them
reach llama.cpp, the sentence limit stops a reply where a sentence ends, and the
shipped settings give short English answers that end a sentence and do not loop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from benchmarks.answer_shape import language, repeated_4grams, sentences, shape
from voice_membrane.pipeline.config import ConfigError, load_pipeline
from voice_membrane.providers.llama_sampling import LlamaSampling, SentenceLimit

ROOT = Path(__file__).resolve().parent.parent


def limited(text: str, most: int, step: int) -> str:
    limit = SentenceLimit(most)
    said = ""
    for i in range(0, len(text), step):
        said += limit.feed(text[i : i + step])
        if limit.reached:
            break
    return said + limit.flush()


@pytest.mark.parametrize("step", [1, 2, 5, 100])
def test_the_sentence_limit_ends_the_reply_on_its_last_sentence_however_it_streams(
    step: int,
) -> None:
    text = "Hey, Dr. Lee measured 3.14 today. It is pi! And then it goes on. And on."
    assert limited(text, 2, step) == "Hey, Dr. Lee measured 3.14 today. It is pi!"
    assert limited(text, 1, step) == "Hey, Dr. Lee measured 3.14 today."
    assert limited("no end in sight and no mark", 1, step) == "no end in sight and no mark"
    assert limited("One. Two and Dr. Who", 2, step) == "One. Two and Dr. Who"  # held, then given


def test_a_line_counts_as_a_sentence() -> None:
    assert limited("Boil an egg:\n1. Boil it.\n2. Eat it.", 2, 3) == "Boil an egg:\n1. Boil it."


def test_reply_shape_measures() -> None:
    assert language("The capital of France is Paris.") == "en"
    assert language("La capitale de la France est Paris.") == "fr"
    assert language("Der Himmel ist blau, weil das Licht gestreut wird.") == "de"
    assert language("El cielo es azul por la luz.") == "es"
    assert language("Awesome.") is None  # nothing to tell it by
    assert sentences("Hey, I'm here. Dr. Who? Yes") == ["Hey, I'm here.", "Dr. Who?", "Yes"]
    assert repeated_4grams("paris, 2023, 2023, 2023, 2023, 2023, 2023") == 2
    assert repeated_4grams("one two three four five") == 0
    looped = shape("It is sunny. It is sunny. It is sunny")
    assert (looped.sentences, looped.finished, looped.repeats) == (3, False, 3)


def test_the_llm_settings_reach_llama_cpp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each [llm] knob of a pipeline file is what llama.cpp is called with; the
    sentence limit stops the generation (the generator is closed early)."""
    pytest.importorskip("llama_cpp", reason="the local extra is not installed")
    from voice_membrane.pipeline.build import build_parts
    from voice_membrane.providers.local_llama import LocalLlama

    pipeline = tmp_path / "mine.toml"
    pipeline.write_text(
        '[llm]\nspec = "local"\nmax_tokens = 33\ntemperature = 0.25\ntop_p = 0.8\n'
        'top_k = 12\nmin_p = 0.1\nrepeat_penalty = 1.2\nstop = ["\\nUser:"]\n'
        "max_sentences = 1\nseed = 5\n"
    )
    config = load_pipeline(pipeline).with_overrides({"sink": {"kind": "null"}})
    source = build_parts(config).membrane.provider.source  # type: ignore[attr-defined]
    assert isinstance(source, LocalLlama)
    anyio.run(source.start)
    calls: list[dict[str, Any]] = []
    closed: list[bool] = []

    def recording(**kwargs: Any) -> Iterator[dict[str, Any]]:
        calls.append(kwargs)
        try:
            for text in ["One", " sentence.", " Two", " more.", " Three."]:
                yield {"choices": [{"delta": {"content": text}}]}
        finally:
            closed.append(True)

    monkeypatch.setattr(source.model.llama, "create_chat_completion", recording)

    async def reply() -> str:
        return "".join([d async for d in source.stream([])])

    assert anyio.run(reply) == "One sentence."
    (call,) = calls
    expected = {"max_tokens": 33, "temperature": 0.25, "top_p": 0.8, "top_k": 12}
    expected |= {"min_p": 0.1, "repeat_penalty": 1.2, "stop": ["\nUser:"], "seed": 5}
    assert {k: call[k] for k in expected} == expected
    assert closed == [True]


@pytest.mark.parametrize(
    ("setting", "value"),
    [("repeat_penalty", 0.5), ("top_p", 0), ("max_sentences", -1), ("top_k", -1)],
)
def test_a_bad_setting_is_one_line(tmp_path: Path, setting: str, value: object) -> None:
    pipeline = tmp_path / "bad.toml"
    pipeline.write_text(f"[llm]\n{setting} = {value}\n")
    with pytest.raises(ConfigError) as excinfo:
        load_pipeline(pipeline)
    assert f"llm.{setting}" in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_the_embedded_voice_pipelines_answer_alike_and_tools_are_not_limited() -> None:
    """local, local-voice and local-espeak share the measured settings; local-tools
    keeps the defaults: no sentence limit to cut a JSON call, no repeat penalty."""
    loaded = {
        name: load_pipeline(ROOT / "pipelines" / f"{name}.toml").llm
        for name in ("local", "local-voice", "local-espeak", "local-tools")
    }
    voices = [loaded[name] for name in ("local", "local-voice", "local-espeak")]
    assert len({(llm.sampling(), llm.temperature, llm.max_tokens) for llm in voices}) == 1
    assert voices[0].sampling().max_sentences == 2
    assert loaded["local-tools"].sampling() == LlamaSampling()


def test_the_answers_report_renders_a_row_per_setting_and_kind() -> None:
    from benchmarks.answers import (
        Answer,
        AnswersResults,
        SettingRun,
        answers_section,
        before_llm,
        questions,
        shipped_llm,
    )

    asked = questions()
    assert {q.kind for q in asked} == {"spoken", "typed", "other language"}
    assert "what is the weather in paris today" in {q.text for q in asked}

    def run(label: str, said: str, llm: Any) -> SettingRun:
        got = [Answer(q, seed, said, shape(said)) for q in asked for seed in (1, 2)]
        return SettingRun(label, llm, got, 1.0)

    looped = "Paris, 2023, 2023, 2023, 2023, 2023"
    text = answers_section(
        AnswersResults(
            [run("before", looped, before_llm()), run("now", "It is sunny.", shipped_llm())],
            (1, 2),
        )
    )
    rows = [line for line in text.splitlines() if line.startswith(("| before", "| now"))]
    assert len(rows) == 6
    assert rows[0].split(" | ")[8:10] == ["100 %", "1.0"]  # looping, repeated 4-grams
    assert "| now | spoken |" in text and "`It is sunny.`" in text


# Questions the settings before issue 43 answered in French, in a loop or at length.
ASKED = (
    "what is the weather in paris today",
    "play some music",
    "call my mother",
    "Why is the sky blue?",
)


def test_the_embedded_model_answers_in_short_english_sentences_without_loops() -> None:
    """The shipped settings on the real model, seeds 1-3: every answer is one or
    two sentences and repeats no 4-gram of words; most (2 of 3 per question) are
    English and end on a sentence. Which seed's answer falls short depends on the
    CPU's arithmetic (seed 1 says "playing music" on an AVX-512 machine), so the
    test asks for the share the benchmark shows, not one fixed text."""
    pytest.importorskip("llama_cpp", reason="the local extra is not installed")
    from benchmarks.answers import answer, local_source, shipped_llm

    llm = shipped_llm()
    source = local_source(llm)

    async def answers(text: str) -> list[str]:
        return [await answer(source, llm, text, seed=seed) for seed in (1, 2, 3)]

    for text in ASKED:
        said = anyio.run(answers, text)
        shapes = [shape(reply) for reply in said]
        assert all(got.repeats == 0 and got.one_or_two for got in shapes), (text, said)
        good = [got.language == "en" and got.finished for got in shapes]
        assert sum(good) >= 2, (text, said)
