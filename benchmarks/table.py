"""The report model: a markdown table whose columns know their header, how a
row gives their cell, and for figures over many samples their unit and spread."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from voice_membrane.bench.stats import Spread

Row = TypeVar("Row")


@dataclass(frozen=True)
class Column(Generic[Row]):
    """A column: ``cell`` gives a row's value (with ``spread``: its samples, shown
    as those order statistics, named in the header after ``unit``)."""

    name: str
    cell: Callable[[Row], object]
    spread: Spread | None = None
    unit: str = ""

    @property
    def header(self) -> str:
        unit = f", {self.unit}" if self.unit else ""
        if self.spread is None:
            return self.name + unit
        return f"{self.name}{unit} {self.spread.header}"

    def render(self, row: Row) -> str:
        value = self.cell(row)
        if self.spread is not None:
            return self.spread.cell(value)  # type: ignore[arg-type]
        return str(value)


@dataclass(frozen=True)
class Table(Generic[Row]):
    columns: Sequence[Column[Row]]

    def render(self, rows: Iterable[Row]) -> str:
        return table(
            [c.header for c in self.columns], [[c.render(r) for c in self.columns] for r in rows]
        )


def cell(value: object) -> str:
    """One table cell: pipes escaped, newlines shown as ⏎ so a row stays on one line."""
    return str(value).replace("|", "\\|").replace("\n", "⏎")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def quoted(text: str, limit: int = 0) -> str:
    """``text`` as inline code, optionally cut to ``limit`` characters, newlines visible."""
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return "`" + text.replace("\n", "⏎").replace("`", "'") + "`"


def met(value: float | None, target: float) -> str:
    """A target's verdict: at most ``target`` is met."""
    if value is None:
        return "not measured"
    return "**met**" if value <= target else "**missed**"
