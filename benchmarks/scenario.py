"""A benchmark as the runner sees it: what it measures and how its results
become sections of the report. Each report module declares its ``SCENARIO``;
``benchmarks.run`` runs them in order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Scenario:
    """``name``: for ``--only``, ``--skip-NAME`` (when ``skippable``) and the
    saved results' file; ``titles``: its ``## `` sections, in order; ``errors``:
    what makes it "not run" (a missing extra, no model, a server that did not
    start) rather than fail the run."""

    name: str
    titles: tuple[str, ...]
    measure: Callable[[], Any]
    report: Callable[[Any], list[str]]
    skippable: bool = False
    errors: tuple[type[Exception], ...] = (ImportError,)


@dataclass(frozen=True)
class NotRun:
    """Why a scenario did not run: kept by ``--save`` (as results are) so that
    ``--load`` says it again."""

    why: str


def unavailable(title: str, why: str) -> str:
    """A section for a benchmark that could not run: say why instead of inventing numbers."""
    return f"## {title}\n\nNot run: {why}"


def skipped(title: str, flag: str) -> str:
    return f"## {title}\n\nNot run: skipped (`{flag}`)."
