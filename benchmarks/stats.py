"""Small summary statistics shared by the benchmarks."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from voice_membrane.bench.stats import nearest_rank  # the command's: one definition


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def share(flags: Sequence[bool]) -> float:
    """Fraction of ``flags`` that are True."""
    return sum(flags) / len(flags) if flags else 0.0


__all__ = ["median", "nearest_rank", "share"]
