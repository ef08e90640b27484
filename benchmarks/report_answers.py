"""The embedded model's answers section of the benchmark report (``bench_answers``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from benchmarks.bench_answers import SEEDS, Answer, AnswersResults, SettingRun, run_answers_bench
from benchmarks.scenario import Scenario
from benchmarks.table import quoted, table
from voice_membrane.bench.stats import median

ANSWERS_TITLE = "Embedded model: what its answers look like"
KINDS = ("spoken", "typed", "other language")
EXAMPLES = (
    "what is the weather in paris today",
    "tell me a joke",
    "Pourquoi le ciel est-il bleu ?",
)
EXAMPLE_CHARS = 160


def _share(answers: Sequence[Answer], test: Callable[[Answer], bool]) -> str:
    return f"{100 * sum(map(test, answers)) / len(answers):.0f} %" if answers else "—"


def _in_language(a: Answer) -> bool:
    return a.shape.language == a.question.language


def _spread(answers: Sequence[Answer], test: Callable[[Answer], bool]) -> str:
    """The share per seed, lowest-highest."""
    shares = []
    for seed in sorted({a.seed for a in answers}):
        mine = [a for a in answers if a.seed == seed]
        shares.append(100 * sum(map(test, mine)) / len(mine))
    return f"{min(shares):.0f}-{max(shares):.0f}"


def _rows(run: SettingRun) -> list[list[object]]:
    rows: list[list[object]] = []
    for kind in KINDS:
        got = [a for a in run.answers if a.question.kind == kind]
        if not got:
            continue
        words = [float(a.shape.words) for a in got]
        rows.append(
            [
                run.label,
                kind,
                len(got),
                _share(got, _in_language),
                _spread(got, _in_language),
                _share(got, lambda a: a.shape.finished),
                _share(got, lambda a: a.shape.one_or_two),
                _spread(got, lambda a: a.shape.one_or_two),
                _share(got, lambda a: a.shape.repeats > 0),
                f"{sum(a.shape.repeats for a in got) / len(got):.1f}",
                f"{median(words):.0f} / {max(words):.0f}",
            ]
        )
    return rows


def _settings(run: SettingRun) -> str:
    llm = run.llm
    knobs = (
        f"temperature {llm.temperature}, top_p {llm.top_p}, top_k {llm.top_k}, min_p "
        f"{llm.min_p}, repeat_penalty {llm.repeat_penalty}, max_tokens {llm.max_tokens}, "
        f"max_sentences {llm.max_sentences}, stop {list(llm.stop)}"
    )
    prompt = quoted(llm.system_prompt) if llm.system_prompt else "LocalLlama's default"
    return f"*{run.label}*: system prompt {prompt}; {knobs}; {run.seconds:.0f} s."


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
    method = (
        "The shipped questions asked of the embedded SmolLM2-135M one at a time, each in a "
        "fresh conversation, as the pipeline asks them (`create_provider` with the "
        "`[llm]` settings of `pipelines/local.toml`), one llama.cpp thread, seeds "
        f"{', '.join(map(str, results.seeds))}: *spoken* are the texts of "
        "`audio_fixtures/speech/` (backchannels left out), *typed* `make run`'s prompt, "
        "the bench's default prompts and its warm-up, *other language* six questions "
        "typed in French, Spanish and German. Measured on the reply's text "
        "(`benchmarks/answer_shape.py`): *in its language* (a stopword profile; a reply "
        "too short to tell counts as not), *seeds* that share per seed, lowest-highest; "
        "*ends a sentence* (a terminal mark), *1-2 sentences* (the speech chunker's "
        "sentence rules), *looping*: replies with a 4-gram of words said twice, and "
        "repeated 4-grams per reply; words p50 / max. "
        + " ".join(_settings(run) for run in results.runs)
    )
    headers = [
        "Settings",
        "questions",
        "replies",
        "in its language",
        "seeds",
        "ends a sentence",
        "1-2 sentences",
        "seeds",
        "looping",
        "repeated 4-grams",
        "words",
    ]
    rows = [row for run in results.runs for row in _rows(run)]
    return "\n\n".join([f"## {ANSWERS_TITLE}", method, table(headers, rows), _examples(results)])


def main() -> None:
    parser = argparse.ArgumentParser(
        description="The embedded model's answers to the shipped questions (bench_answers)."
    )
    parser.add_argument("--seeds", type=int, default=len(SEEDS), help="how many seeds (1, 2, …)")
    args = parser.parse_args()
    print(answers_section(run_answers_bench(tuple(range(1, args.seeds + 1)))))


SCENARIO = Scenario(
    "answers", (ANSWERS_TITLE,), run_answers_bench, lambda r: [answers_section(r)], True
)

if __name__ == "__main__":
    main()
