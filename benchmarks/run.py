"""Run every benchmark, print the report and write it to ``build/benchmarks.md``
(untracked; ``make bench-docs`` writes ``docs/benchmarks.md`` with ``--output``).

Usage: ``python -m benchmarks.run [--output PATH] [--skip-first-audio]
[--skip-long-session] [--skip-answers] [--skip-voice] [--skip-bargein]
[--skip-voice-serve] [--skip-turns] [--only NAME,...]`` (``make bench``).
A benchmark whose library module is missing is reported as not run rather than failing
the whole suite; ``--skip-first-audio`` leaves out the embedded pipelines' latency run,
``--skip-long-session`` the embedded model's long session, ``--skip-answers`` the
embedded model's answers over the shipped questions, ``--skip-voice`` the
voice-to-voice run over the spoken fixtures, ``--skip-bargein`` the live
speaker-over-the-reply run, ``--skip-voice-serve`` the callers speaking to
``serve`` (voice to voice over the endpoint), ``--skip-turns`` the turn-taking
corpus through the listener (fixed silence against the end-of-turn model).
``--only voice,turns`` runs those parts alone and puts their sections in place of
the same sections of the report at ``--output`` (the rest kept as they were, the
header saying which sections are newer).
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import (
    report,
    report_answers,
    report_bargein,
    report_first_audio,
    report_long_session,
    report_membrane,
    report_serve,
    report_stt,
    report_tts,
    report_turns,
    report_voice,
    report_voice_serve,
    report_webrtc,
)
from benchmarks.bench_answers import run_answers_bench
from benchmarks.bench_bargein import run_bargein_bench, run_echo_bench
from benchmarks.bench_chunker import run_chunker_bench
from benchmarks.bench_first_audio import run_first_audio_bench
from benchmarks.bench_long_session import run_long_session_bench
from benchmarks.bench_membrane import run_membrane_bench
from benchmarks.bench_parser import run_parser_bench
from benchmarks.bench_serve_load import run_serve_load_bench
from benchmarks.bench_stt import run_stt_bench
from benchmarks.bench_tts_engines import run_tts_engines_bench
from benchmarks.bench_turns import run_turns_bench
from benchmarks.bench_voice import run_voice_bench
from benchmarks.bench_voice_serve import run_voice_serve_bench
from voice_membrane.bench.membrane_cost import MembraneResults
from voice_membrane.pipeline.config import ConfigError

DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "build" / "benchmarks.md"


@dataclass(frozen=True)
class Part:
    """One benchmark's sections: ``name`` for ``--only``, ``skip`` its ``--skip-``
    flag (None: always run), ``errors`` what makes it "not run" rather than fail."""

    name: str
    titles: tuple[str, ...]
    run: Callable[[], list[str]]
    skip: str | None = None
    errors: tuple[type[Exception], ...] = (ImportError,)


def _chunker() -> list[str]:
    chunker = run_chunker_bench()
    return [report.chunker_section(chunker), report.findings_section(chunker)]


def _bargein() -> list[str]:
    return [
        report_bargein.bargein_section(run_bargein_bench()),
        report_bargein.echo_section(run_echo_bench()),
    ]


_membrane: list[MembraneResults] = []  # (the method section's paragraph needs it)


def _membrane_part() -> list[str]:
    _membrane[:] = [run_membrane_bench()]
    return [report_membrane.membrane_section(_membrane[0])]


PARTS = (
    Part("parser", (report.PARSER_TITLE,), lambda: [report.parser_section(run_parser_bench())]),
    Part("chunker", (report.CHUNKER_TITLE,), _chunker),
    Part(
        "first-audio",
        (report_first_audio.FIRST_AUDIO_TITLE,),
        lambda: [report_first_audio.first_audio_section(run_first_audio_bench())],
        "first_audio",
    ),
    Part(
        "long-session",
        (report_long_session.LONG_SESSION_TITLE,),
        lambda: [report_long_session.long_session_section(run_long_session_bench())],
        "long_session",
    ),
    Part(
        "answers",
        (report_answers.ANSWERS_TITLE,),
        lambda: [report_answers.answers_section(run_answers_bench())],
        "answers",
    ),
    Part("stt", (report_stt.STT_TITLE,), lambda: [report_stt.stt_section(run_stt_bench())]),
    Part(
        "voice",
        (report_voice.VOICE_TITLE,),
        lambda: [report_voice.voice_section(run_voice_bench())],
        "voice",
    ),
    Part(
        "turns",
        (report_turns.TURNS_TITLE,),
        lambda: [report_turns.turns_section(run_turns_bench())],
        "turns",
        (ImportError, ConfigError),  # ConfigError: no end-of-turn model
    ),
    Part("bargein", (report_bargein.BARGEIN_TITLE, report_bargein.ECHO_TITLE), _bargein, "bargein"),
    Part(
        "voice-serve",
        (report_voice_serve.VOICE_SERVE_TITLE,),
        lambda: [report_voice_serve.voice_serve_section(run_voice_serve_bench())],
        "voice_serve",
        (ImportError, RuntimeError),  # RuntimeError: the server did not start
    ),
    Part("membrane", (report_membrane.MEMBRANE_TITLE,), _membrane_part),
    Part("tts", (report_tts.TTS_TITLE,), lambda: [report_tts.tts_section(run_tts_engines_bench())]),
    Part(
        "serve",
        (report_serve.SERVE_TITLE,),
        lambda: [report_serve.serve_section(run_serve_load_bench())],
        errors=(ImportError, RuntimeError),
    ),
    Part(
        "webrtc",
        (report_webrtc.WEBRTC_TITLE,),
        lambda: [report_webrtc.webrtc_section(report_webrtc.run_webrtc_bench())],
        "webrtc",
        (ImportError, RuntimeError),  # ImportError: no aiortc (the webrtc extra)
    ),
)


def _sections(part: Part, skipped: Collection[str]) -> list[str]:
    if part.skip is not None and part.skip in skipped:
        flag = "--skip-" + part.skip.replace("_", "-")
        return [report.skipped(title, flag) for title in part.titles]
    try:
        return part.run()
    except part.errors as error:
        return [report.unavailable(part.titles[0], error)]


def build_report(skipped: Collection[str] = (), only: Collection[str] | None = None) -> str:
    """The report; ``skipped``: the parts' ``skip`` names left out. ``only``:
    just those parts' sections, without the header and the method."""
    _membrane.clear()
    sections = [] if only is not None else [report.header()]
    for part in PARTS:
        if only is None or part.name in only:
            sections += _sections(part, skipped)
    if only is None:
        method = report.method_section()
        if _membrane:
            method += "\n\n" + report_membrane.method_paragraph(_membrane[0])
        sections.append(method)
    return "\n\n".join(sections) + "\n"


def splice(old: str, new: str, names: list[str]) -> str:
    """``old`` (a whole report) with each ``## `` section of ``new`` put in place
    of the section of the same title (a new one before the next part's that is
    there, in the report's order), and the header saying so."""
    fresh = {m.group(1): m.group(0).rstrip("\n") + "\n\n" for m in _SECTION.finditer(new)}
    out = _SECTION.sub(lambda m: fresh.pop(m.group(1), m.group(0)), old)
    order = [title for part in PARTS for title in part.titles]
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
    for part in PARTS:
        if part.skip is not None:
            parser.add_argument(
                "--skip-" + part.skip.replace("_", "-"),
                action="store_true",
                help=f"leave out {part.titles[0]}",
            )
    parser.add_argument(
        "--only",
        help="comma-separated parts to run alone and splice into --output: "
        + ", ".join(part.name for part in PARTS),
    )
    args = parser.parse_args(argv)
    skipped = {p.skip for p in PARTS if p.skip is not None and getattr(args, "skip_" + p.skip)}
    started = time.perf_counter()
    if args.only:
        names = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = sorted(set(names) - {part.name for part in PARTS})
        if unknown:
            parser.error(f"--only: unknown part(s) {', '.join(unknown)}")
        if not args.output.is_file():
            parser.error(f"--only needs a report to splice into: {args.output} is not there")
        text = splice(args.output.read_text(encoding="utf-8"), build_report(only=set(names)), names)
    else:
        text = build_report(skipped)
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
