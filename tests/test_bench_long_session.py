"""The long-session benchmark's report section (benchmarks.long_session), from
given figures: the run itself takes minutes (``make bench``)."""

from __future__ import annotations

from benchmarks.long_session import (
    LONG_SESSION_TITLE,
    LongSessionResults,
    ModeRun,
    TurnFigures,
    long_session_section,
)


def mode(in_place: bool, trimmed_ms: float, evaluated: int) -> ModeRun:
    turns = [TurnFigures(100.0 + n, False, 60, 500 + 50 * n) for n in range(5)]
    turns += [TurnFigures(trimmed_ms, True, evaluated, 1500), TurnFigures(90.0, False, 60, 1550)]
    turns.append(TurnFigures(trimmed_ms * 2, True, evaluated, 1500))
    return ModeRun(in_place, turns, seconds=42.0)


def test_the_section_sets_trimmed_turns_beside_untrimmed_ones_for_both_paths() -> None:
    results = LongSessionResults([mode(False, 9000.0, 1470), mode(True, 380.0, 83)], 44, 32, 2016)
    section = long_session_section(results)
    assert section.startswith(f"## {LONG_SESSION_TITLE}")
    lines = section.splitlines()
    old = next(line for line in lines if line.startswith("| read again"))
    new = next(line for line in lines if line.startswith("| trimmed in place"))
    # untrimmed p50 / max, trimmed p50 / max, trims, evaluated on a trimmed turn
    assert "| 102 / 104 | 13500 / 18000 | 2 | 1470 |" in old
    assert "| 102 / 104 | 570 / 760 | 2 | 83 |" in new
    assert "over 2016 tokens" in section and "44 turns" in section
    assert "trim_in_place=False" in section


def test_a_run_with_no_trim_says_so_rather_than_inventing_figures() -> None:
    run = ModeRun(True, [TurnFigures(100.0, False, 60, 500)], seconds=1.0)
    section = long_session_section(LongSessionResults([run], 1, 32, 2016))
    assert "| 100 / 100 | — | 0 | — |" in section
