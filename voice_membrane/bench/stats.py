"""Percentiles and medians of a benchmark's figures."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))


def nearest_rank(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: always a value that was actually observed
    (no interpolation between two turns that both happened)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return float(ordered[rank - 1])


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def summarize(values: Sequence[float]) -> dict[str, float] | None:
    """p50, p95, p99 and max of ``values`` (None for none), rounded to µs."""
    if not values:
        return None
    return {name: round(nearest_rank(values, q), 3) for name, q in QUANTILES}
