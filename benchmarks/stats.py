"""Small summary statistics shared by the benchmarks."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def nearest_rank(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: always a value that was actually observed."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return float(ordered[rank - 1])


def share(flags: Sequence[bool]) -> float:
    """Fraction of ``flags`` that are True."""
    return sum(flags) / len(flags) if flags else 0.0
