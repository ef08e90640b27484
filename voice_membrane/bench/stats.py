"""Percentiles and medians of a benchmark's figures."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

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


# An order statistic by name: nearest rank, or the interpolated median (which
# averages the two middle values of an even count).
_POINTS = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "max": 1.0}


@dataclass(frozen=True, slots=True)
class Spread:
    """How a cell shows a figure over many samples: which order statistics
    (``p50``, ``p90``, ``p95``, ``p99``, ``max``, ``min``, ``median``), to how
    many digits, with a sign or not; "—" when there are no samples."""

    points: tuple[str, ...] = ("p50", "p95")
    digits: int = 0
    signed: bool = False

    @property
    def header(self) -> str:
        return " / ".join(self.points)

    def values(self, samples: Sequence[float]) -> list[float]:
        return [_point(samples, name) for name in self.points]

    def cell(self, samples: Sequence[float]) -> str:
        if not samples:
            return "—"
        sign = "+" if self.signed else ""
        return " / ".join(f"{v:{sign}.{self.digits}f}" for v in self.values(samples))


def _point(samples: Sequence[float], name: str) -> float:
    if name == "median":
        return median(samples)
    if name == "min":
        return float(min(samples))
    return nearest_rank(samples, _POINTS[name])


def span(samples: Sequence[float], digits: int = 0) -> str:
    """A timing repeated a few times: its median (min to max)."""
    mid, low, high = (f"{v:.{digits}f}" for v in median_min_max(samples))
    return f"{mid} ({low} to {high})"


def median_min_max(samples: Sequence[float]) -> tuple[float, float, float]:
    """A few repetitions' figure as (median, min, max): what ``span`` writes."""
    return median(samples), float(min(samples)), float(max(samples))
