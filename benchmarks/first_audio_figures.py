"""The figures of a first-audio run (``voice_membrane.bench.runner``'s
``TargetRun``) as the report reads them: each counted turn's values, beyond the
runner's own the ones derived here (``DERIVED``), their nearest-rank
percentiles and the cells they are written in."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from voice_membrane.bench.runner import TargetRun, TurnSample
from voice_membrane.bench.stats import nearest_rank


def after_first_token(turn: TurnSample) -> float | None:
    assert turn.report is not None  # counted turns only
    token, first = turn.report.first_chunk_token_ms, turn.report.stamps_ms["first_token"]
    return None if token is None or first is None else token - first


def ms_per_token(turn: TurnSample) -> float | None:
    assert turn.report is not None
    between, n = after_first_token(turn), turn.report.tokens_to_first_chunk
    return None if between is None or n is None or n < 2 else between / (n - 1)


def tokens(turn: TurnSample) -> float | None:
    assert turn.report is not None
    n = turn.report.tokens_to_first_chunk
    return None if n is None else float(n)


def words(turn: TurnSample) -> float | None:
    return None if turn.first_piece is None else float(len(turn.first_piece.split()))


# Per-turn figures of this report beyond the runner's own (``TargetRun.figures``).
DERIVED: dict[str, Callable[[TurnSample], float | None]] = {
    "after_first_token": after_first_token,  # first token → the delta that released piece 1
    "ms_per_token": ms_per_token,  # the LLM's pace over that stretch
    "tokens_to_first_chunk": tokens,
    "first_piece_words": words,
}


def turn_values(run: TargetRun, name: str, session: int | None = None) -> list[float]:
    """A figure's values over the counted turns (of one session if given)."""
    turns = [t for t in run.counted if session is None or t.session == session]
    derive = DERIVED.get(name)
    if derive is not None:
        return [v for turn in turns if (v := derive(turn)) is not None]
    return [v for turn in turns if (v := run.figures(turn).get(name)) is not None]


def pct(
    run: TargetRun | None, name: str, q: float = 0.5, session: int | None = None
) -> float | None:
    """Nearest-rank percentile, as the command reports it (None: not measured)."""
    if run is None or run.error is not None:
        return None
    found = turn_values(run, name, session)
    return nearest_rank(found, q) if found else None


def ms(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def p50_p95(run: TargetRun, name: str, digits: int = 0) -> str:
    return f"{ms(pct(run, name), digits)} / {ms(pct(run, name, 0.95), digits)}"


def counted(run: TargetRun) -> str:
    return f"{len(run.counted)} ({len(run.turns) - len(run.counted)})"


def met(value: float | None, target: float) -> str:
    if value is None:
        return "not measured"
    return "**met**" if value <= target else "**missed**"


def signed(value: float | None, base: float | None) -> str:
    return "—" if value is None or base is None else f"{value - base:+.0f}"


def gaps(run: TargetRun) -> str:
    gaps = run.gaps()
    return f"{gaps['turns']:.0f} ({gaps['ms']:.0f} ms)"


def measured_runs(runs: Sequence[TargetRun | None]) -> list[TargetRun]:
    return [run for run in runs if run is not None and run.error is None]
