"""``/metrics`` of a group of workers (``serve --workers N``): whichever worker a
scrape reaches answers for all of them.

The parent gives every worker the same private ``PROMETHEUS_MULTIPROC_DIR``;
prometheus-client then keeps each worker's values in files there, and a
scrape merges them (counters and histograms summed over workers, dead ones
included, so a restart is no counter reset; gauges as their
``multiprocess_mode`` says). Process CPU and memory are per process, which
that merge cannot do: they are read from ``/proc`` for every process the
parent lists in ``workers.pids`` and exported with ``worker`` and ``pid``
labels (sum them for the group).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
PIDS_FILE = "workers.pids"  # "NAME PID" lines, rewritten by the parent as workers (re)start


def multiproc_dir() -> Path | None:
    """The group's metrics directory when this process is one of its workers."""
    value = os.environ.get(MULTIPROC_ENV)
    return Path(value) if value else None


def write_pids(folder: Path, pids: Iterable[tuple[str, int]]) -> None:
    """The processes whose CPU and memory a scrape shows; replaced atomically so a
    scrape never reads half a file."""
    temporary = folder / (PIDS_FILE + ".tmp")
    temporary.write_text("".join(f"{name} {pid}\n" for name, pid in pids), encoding="utf-8")
    temporary.replace(folder / PIDS_FILE)


def read_pids(folder: Path) -> list[tuple[str, int]]:
    try:
        text = (folder / PIDS_FILE).read_text(encoding="utf-8")
    except OSError:
        return [("worker", os.getpid())]  # before the parent wrote it: this process
    pairs = []
    for line in text.splitlines():
        name, _, pid = line.partition(" ")
        if pid.isdigit():
            pairs.append((name, int(pid)))
    return pairs


class GroupProcessCollector(Collector):
    """prometheus-client's process metrics (``process_cpu_seconds_total``,
    ``process_resident_memory_bytes``, …) for every process of the group, each
    sample labelled with its ``worker`` and ``pid``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for name, pid in read_pids(self.folder):
            # A process that has just exited reads as nothing: it is skipped.
            one = ProcessCollector(pid=lambda pid=pid: pid, registry=None)  # type: ignore[misc]
            for family in one.collect():
                target = merged.setdefault(
                    family.name, Metric(family.name, family.documentation, family.type)
                )
                for sample in family.samples:
                    labels = {**sample.labels, "worker": name, "pid": str(pid)}
                    target.add_sample(sample.name, labels, sample.value)
        yield from merged.values()


def group_registry(folder: Path) -> CollectorRegistry:
    """A registry that reads the whole group at each scrape."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(folder))  # type: ignore[no-untyped-call]
    registry.register(GroupProcessCollector(folder))
    return registry
