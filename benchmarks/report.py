"""The report's header and its closing method section (the benchmarks' own
sections are their scenarios')."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime

from benchmarks.first_audio import PROMPTS
from benchmarks.parser import REPEATS
from benchmarks.prose import prose


def header() -> str:
    machine = (
        f"{platform.platform()}, {platform.machine()}, {os.cpu_count()} logical CPUs, "
        f"{platform.python_implementation()} {platform.python_version()}; "
        # Other work on the machine shows up as spread between repeats; this says how busy.
        f"1-minute load average {os.getloadavg()[0]:.2f} when the report was written"
    )
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return prose("report", now=now, machine=machine, repeats=REPEATS, prompts=len(PROMPTS))


def method_section() -> str:
    return prose("report#method")
