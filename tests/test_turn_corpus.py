"""The turn-taking corpus (audio_fixtures/turns) is what its manifest says, and
its benchmark (benchmarks/turns.py) runs: a few files through the real
listener make a table with sane rows; with the end-of-turn model a complete
question is decided before the 0.6 s rule decides it, and the model (with the
transcript's shape) cuts no more of the long thinking pauses than the rule does
(issue 44's target). Decisions are compared as sample counts of the same audio,
never as wall-clock times."""

from __future__ import annotations

import anyio
import pytest
import soundfile

from benchmarks.turns import (
    HEADERS,
    LONG_PAUSE_S,
    MANIFEST,
    SETUPS,
    Entry,
    config_for,
    hear,
    load_manifest,
    run_turns_bench,
    turns_section,
)

FIXTURES = MANIFEST.parent.parent
ENTRIES = load_manifest()
FIXED, MODEL = (config_for(changes) for _, changes in SETUPS[:2])


def test_the_corpus_holds_what_the_issue_asks() -> None:
    kinds = [e.kind for e in ENTRIES]
    assert set(kinds) == {"complete", "thinking_pause"}
    assert kinds.count("complete") >= 30 and kinds.count("thinking_pause") >= 30
    paused = [e for e in ENTRIES if e.kind == "thinking_pause"]
    assert all(e.pauses for e in paused)
    made = [e for e in paused if e.file.startswith("turns/")]
    assert len(made) >= 30 and all(0.45 <= b - a <= 2.1 for e in made for a, b in e.pauses)
    assert len({e.file for e in ENTRIES}) == len(ENTRIES)
    flac = {f"turns/{p.name}" for p in MANIFEST.parent.glob("*.flac")}
    assert flac <= {e.file for e in ENTRIES}  # (no file the manifest does not describe)
    assert sum((FIXTURES / f).stat().st_size for f in flac) < 3_000_000


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.file for e in ENTRIES])
def test_each_entry_agrees_with_its_audio(entry: Entry) -> None:
    info = soundfile.info(FIXTURES / entry.file)
    assert (info.samplerate, info.channels) == (16_000, 1)
    assert abs(info.duration - entry.duration_s) <= 0.001
    edges = [t for a, b, _ in entry.spans for t in (a, b)]
    assert edges == sorted(edges) and edges[0] >= 0 and edges[-1] <= round(info.duration, 3)
    assert entry.end_s == entry.spans[-1][1]
    gaps = [(a[1], b[0]) for a, b in zip(entry.spans, entry.spans[1:], strict=False)]
    assert list(entry.pauses) == gaps
    assert " ".join(t for _, _, t in entry.spans if t).split() == entry.text.split()


def test_a_quick_run_makes_a_table_with_a_sane_row_per_setup() -> None:
    files = ["speech/questions/what_time.wav", "turns/alarm_six.flac"]
    runs = run_turns_bench(files, whisper=False)
    assert [r.label for r in runs] == [label for label, _ in SETUPS]
    for run in runs:
        assert sorted(h.entry.file for h in run.heard) == sorted(files)
        for heard in run.heard:
            assert heard.turns, heard.entry.file  # a turn was decided
            assert heard.delay_ms is not None and 0 <= heard.delay_ms <= 3_500
    text = turns_section(runs)
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(SETUPS)  # the headers, a row per setup
    assert all(line.count(" | ") == len(HEADERS) - 1 for line in rows)


def decided_ms(entry: Entry, model: bool) -> list[float]:
    heard = anyio.run(hear, entry, MODEL if model else FIXED, None)
    return [ms for ms, _, _ in heard.turns]


@pytest.mark.parametrize("name", ["what_time", "remind_me", "turn_off_lights"])
def test_with_the_model_a_complete_question_is_decided_before_the_rule_decides_it(
    name: str,
) -> None:
    entry = next(e for e in ENTRIES if e.file == f"speech/questions/{name}.wav")
    fixed, model = decided_ms(entry, False), decided_ms(entry, True)
    assert len(fixed) == len(model) == 1
    assert 0 <= model[0] < fixed[0], (model, fixed)


def test_the_model_cuts_no_more_long_thinking_pauses_than_the_rule() -> None:
    # issue 44's target, on the pauses of 1.2 s and more; measured: the rule
    # cuts 11 of 13, the model with the transcript's shape 9 (which and why:
    # docs/listening.md, "The turn-taking corpus")
    long = [e for e in ENTRIES if e.kind == "thinking_pause" and e.longest_pause_s >= LONG_PAUSE_S]
    cut = {model: {e.file for e in long if decided_ms(e, model)[0] < 0} for model in (False, True)}
    assert len(cut[True]) <= len(cut[False]), cut
