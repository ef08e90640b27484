"""Run every benchmark, print the report and write it to ``build/benchmarks.md``
(untracked; ``make bench-docs`` writes ``docs/benchmarks.md`` with ``--output``).

Usage: ``python -m benchmarks.run [--output PATH] [--only NAME,...]
[--skip-NAME ...] [--save DIR | --load DIR]`` (``make bench``). Each benchmark
is a ``Scenario`` declared by its report module, run in the order of
``SCENARIOS``; one whose extra, model or server is missing is reported as not
run rather than failing the whole suite. ``--skip-NAME`` leaves out a slow one
(first-audio, long-session, answers, voice, turns, bargein, voice-serve, webrtc).
``--only voice,turns`` runs those alone and puts their sections in place of the
same sections of the report at ``--output`` (the rest kept as they were, the
header saying which sections are newer). ``--save DIR`` keeps each scenario's
results (pickled); ``--load DIR`` renders the report from them without
measuring again, for work on the report's words and tables.
"""

from __future__ import annotations

import argparse
import pickle
import re
import time
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import (
    answers,
    bargein,
    chunker,
    first_audio_report,
    long_session,
    membrane,
    parser,
    report,
    serve_load,
    stt,
    tts,
    turns,
    voice,
    voice_serve,
    webrtc_report,
)
from benchmarks.scenario import NotRun, Scenario, skipped, unavailable

DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "build" / "benchmarks.md"

SCENARIOS: tuple[Scenario, ...] = (
    parser.SCENARIO,
    chunker.SCENARIO,
    first_audio_report.SCENARIO,
    long_session.SCENARIO,
    answers.SCENARIO,
    stt.SCENARIO,
    voice.SCENARIO,
    turns.SCENARIO,
    bargein.SCENARIO,
    voice_serve.SCENARIO,
    membrane.SCENARIO,
    tts.SCENARIO,
    serve_load.SCENARIO,
    webrtc_report.SCENARIO,
)


def _results(scenario: Scenario, save: Path | None, load: Path | None) -> Any:
    path = (load or save or Path()) / f"{scenario.name}.pickle"
    if load is not None:  # (a pickle: only results this command saved)
        if not path.is_file():
            return NotRun(f"NotSaved: no results of it saved in {load}")
        return pickle.loads(path.read_bytes())
    try:
        results = scenario.measure()
    except scenario.errors as error:
        results = NotRun(f"{type(error).__name__}: {error}")
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(results))
    return results


def build_report(
    skipped_names: Collection[str] = (),
    only: Collection[str] | None = None,
    save: Path | None = None,
    load: Path | None = None,
) -> str:
    """The report; ``skipped_names``: scenarios left out. ``only``: just those
    scenarios' sections, without the header and the method."""
    sections = [] if only is not None else [report.header()]
    measured: dict[str, Any] = {}
    for scenario in SCENARIOS:
        if only is not None and scenario.name not in only:
            continue
        if scenario.name in skipped_names:
            sections += [skipped(t, f"--skip-{scenario.name}") for t in scenario.titles]
            continue
        results = measured[scenario.name] = _results(scenario, save, load)
        if isinstance(results, NotRun):
            sections.append(unavailable(scenario.titles[0], results.why))
        else:
            sections += scenario.report(results)
    if only is None:
        method = report.method_section()
        costs = measured.get("membrane")  # (its paragraph of the method needs them)
        if costs is not None and not isinstance(costs, NotRun):
            method += "\n\n" + membrane.method_paragraph(costs)
        sections.append(method)
    return "\n\n".join(sections) + "\n"


def splice(old: str, new: str, names: list[str]) -> str:
    """``old`` (a whole report) with each ``## `` section of ``new`` put in place
    of the section of the same title (a new one before the next part's that is
    there, in the report's order), and the header saying so."""
    fresh = {m.group(1): m.group(0).rstrip("\n") + "\n\n" for m in _SECTION.finditer(new)}
    out = _SECTION.sub(lambda m: fresh.pop(m.group(1), m.group(0)), old)
    order = [title for scenario in SCENARIOS for title in scenario.titles]
    for title, section in fresh.items():  # (not in the old report: a new benchmark)
        later = order[order.index(title) + 1 :] if title in order else []
        at = next((out.find(f"## {t}\n") for t in later if f"## {t}\n" in out), -1)
        at = at if at >= 0 else out.find("## Method")
        out = out[:at] + section + out[at:] if at >= 0 else out + "\n" + section
    out = _NOTE.sub(lambda m: _without(m, names), out)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    note = f"Sections {', '.join(names)} (`--only`) regenerated {now}."
    return re.sub(r"(Generated [^\n]*\n)", lambda m: m.group(1) + "\n" + note + "\n", out, count=1)


# An earlier run's note: its sections regenerated again leave it (all of them: the note).
_NOTE = re.compile(r"^Sections (.+?) \(`--only`\) regenerated ([^\n]+?)\.\n\n", re.M)


def _without(note: re.Match[str], names: list[str]) -> str:
    left = [name for name in note.group(1).split(", ") if name not in names]
    if not left:
        return ""
    return f"Sections {', '.join(left)} (`--only`) regenerated {note.group(2)}.\n\n"


# A section: its heading to the next ## heading (or the end); ### stay inside.
_SECTION = re.compile(r"^## (.+?)\n.*?(?=^## |\Z)", re.S | re.M)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="report path")
    for scenario in SCENARIOS:
        if scenario.skippable:
            parser.add_argument(
                f"--skip-{scenario.name}",
                action="store_true",
                help=f"leave out {scenario.titles[0]}",
            )
    names = ", ".join(scenario.name for scenario in SCENARIOS)
    parser.add_argument(
        "--only", help=f"comma-separated scenarios to run alone and splice into --output: {names}"
    )
    kept = parser.add_mutually_exclusive_group()
    kept.add_argument(
        "--save", type=Path, metavar="DIR", help="keep each scenario's results in DIR"
    )
    kept.add_argument("--load", type=Path, metavar="DIR", help="render from results kept by --save")
    args = parser.parse_args(argv)
    skipped_names = {
        s.name
        for s in SCENARIOS
        if s.skippable and getattr(args, "skip_" + s.name.replace("-", "_"))
    }
    started = time.perf_counter()
    if args.only:
        only = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = sorted(set(only) - {scenario.name for scenario in SCENARIOS})
        if unknown:
            parser.error(f"--only: unknown part(s) {', '.join(unknown)}")
        if not args.output.is_file():
            parser.error(f"--only needs a report to splice into: {args.output} is not there")
        fresh = build_report(only=set(only), save=args.save, load=args.load)
        text = splice(args.output.read_text(encoding="utf-8"), fresh, only)
    else:
        text = build_report(skipped_names, save=args.save, load=args.load)
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
