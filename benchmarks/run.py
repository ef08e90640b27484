"""Run every benchmark, print the report and write it to ``build/benchmarks.md``
(untracked; ``make bench-docs`` writes ``docs/benchmarks.md`` with ``--output``).

Usage: ``python -m benchmarks.run [--output PATH] [--skip-first-audio]
[--skip-long-session] [--skip-answers] [--skip-voice] [--skip-bargein]
[--skip-voice-serve] [--skip-turns]`` (``make bench``).
A benchmark whose library module is missing is reported as not run rather than failing
the whole suite; ``--skip-first-audio`` leaves out the embedded pipelines' latency run,
``--skip-long-session`` the embedded model's long session, ``--skip-answers`` the
embedded model's answers over the shipped questions, ``--skip-voice`` the
voice-to-voice run over the spoken fixtures, ``--skip-bargein`` the live
speaker-over-the-reply run, ``--skip-voice-serve`` the callers speaking to
``serve`` (voice to voice over the endpoint), ``--skip-turns`` the turn-taking
corpus through the listener (fixed silence against the end-of-turn model).
"""

from __future__ import annotations

import argparse
import time
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


def build_report(
    *,
    first_audio: bool = True,
    long_session: bool = True,
    answers: bool = True,
    voice: bool = True,
    bargein: bool = True,
    voice_serve: bool = True,
    turns: bool = True,
) -> str:
    sections = [report.header()]
    try:
        sections.append(report.parser_section(run_parser_bench()))
    except ImportError as error:
        sections.append(report.unavailable(report.PARSER_TITLE, error))
    try:
        chunker = run_chunker_bench()
    except ImportError as error:
        sections.append(report.unavailable(report.CHUNKER_TITLE, error))
    else:
        sections += [report.chunker_section(chunker), report.findings_section(chunker)]
    if not first_audio:
        sections.append(report.skipped(report_first_audio.FIRST_AUDIO_TITLE, "--skip-first-audio"))
    else:
        try:
            sections.append(report_first_audio.first_audio_section(run_first_audio_bench()))
        except ImportError as error:
            sections.append(report.unavailable(report_first_audio.FIRST_AUDIO_TITLE, error))
    if not long_session:
        sections.append(
            report.skipped(report_long_session.LONG_SESSION_TITLE, "--skip-long-session")
        )
    else:
        try:
            sections.append(report_long_session.long_session_section(run_long_session_bench()))
        except ImportError as error:
            sections.append(report.unavailable(report_long_session.LONG_SESSION_TITLE, error))
    if not answers:
        sections.append(report.skipped(report_answers.ANSWERS_TITLE, "--skip-answers"))
    else:
        try:
            sections.append(report_answers.answers_section(run_answers_bench()))
        except ImportError as error:
            sections.append(report.unavailable(report_answers.ANSWERS_TITLE, error))
    try:
        sections.append(report_stt.stt_section(run_stt_bench()))
    except ImportError as error:
        sections.append(report.unavailable(report_stt.STT_TITLE, error))
    if not voice:
        sections.append(report.skipped(report_voice.VOICE_TITLE, "--skip-voice"))
    else:
        try:
            sections.append(report_voice.voice_section(run_voice_bench()))
        except ImportError as error:
            sections.append(report.unavailable(report_voice.VOICE_TITLE, error))
    if not turns:
        sections.append(report.skipped(report_turns.TURNS_TITLE, "--skip-turns"))
    else:
        try:
            sections.append(report_turns.turns_section(run_turns_bench()))
        except (ImportError, ConfigError) as error:  # ConfigError: no end-of-turn model
            sections.append(report.unavailable(report_turns.TURNS_TITLE, error))
    if not bargein:
        sections.append(report.skipped(report_bargein.BARGEIN_TITLE, "--skip-bargein"))
        sections.append(report.skipped(report_bargein.ECHO_TITLE, "--skip-bargein"))
    else:
        try:
            sections.append(report_bargein.bargein_section(run_bargein_bench()))
        except ImportError as error:
            sections.append(report.unavailable(report_bargein.BARGEIN_TITLE, error))
        try:
            sections.append(report_bargein.echo_section(run_echo_bench()))
        except ImportError as error:
            sections.append(report.unavailable(report_bargein.ECHO_TITLE, error))
    if not voice_serve:
        sections.append(report.skipped(report_voice_serve.VOICE_SERVE_TITLE, "--skip-voice-serve"))
    else:
        try:
            sections.append(report_voice_serve.voice_serve_section(run_voice_serve_bench()))
        except (ImportError, RuntimeError) as error:  # RuntimeError: the server did not start
            sections.append(report.unavailable(report_voice_serve.VOICE_SERVE_TITLE, error))
    membrane: MembraneResults | None = None
    try:
        membrane = run_membrane_bench()
    except ImportError as error:
        sections.append(report.unavailable(report_membrane.MEMBRANE_TITLE, error))
    else:
        sections.append(report_membrane.membrane_section(membrane))
    try:
        sections.append(report_tts.tts_section(run_tts_engines_bench()))
    except ImportError as error:
        sections.append(report.unavailable(report_tts.TTS_TITLE, error))
    try:
        sections.append(report_serve.serve_section(run_serve_load_bench()))
    except (ImportError, RuntimeError) as error:  # RuntimeError: the server did not start
        sections.append(report.unavailable(report_serve.SERVE_TITLE, error))
    method = report.method_section()
    if membrane is not None:
        method += "\n\n" + report_membrane.method_paragraph(membrane)
    sections.append(method)
    return "\n\n".join(sections) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="report path")
    parser.add_argument(
        "--skip-first-audio",
        action="store_true",
        help="leave out the first-audio latency of the embedded pipelines (~2 minutes)",
    )
    parser.add_argument(
        "--skip-long-session",
        action="store_true",
        help="leave out the embedded model's long session, trimmed both ways (~2 minutes)",
    )
    parser.add_argument(
        "--skip-answers",
        action="store_true",
        help="leave out the embedded model's answers to the shipped questions (~8 minutes)",
    )
    parser.add_argument(
        "--skip-voice",
        action="store_true",
        help="leave out voice to voice over the spoken fixtures (~2 minutes)",
    )
    parser.add_argument(
        "--skip-bargein",
        action="store_true",
        help="leave out barge-in by voice, a live user over the reply (~1.5 minutes)",
    )
    parser.add_argument(
        "--skip-voice-serve",
        action="store_true",
        help="leave out voice to voice over the endpoint and barge-in on a call, 1 and 50 "
        "callers (~4.5 minutes)",
    )
    parser.add_argument(
        "--skip-turns",
        action="store_true",
        help="leave out turn-taking on the turn corpus: fixed silence against the "
        "end-of-turn model, and whisper in real time (~4 minutes)",
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    text = build_report(
        first_audio=not args.skip_first_audio,
        long_session=not args.skip_long_session,
        answers=not args.skip_answers,
        voice=not args.skip_voice,
        bargein=not args.skip_bargein,
        voice_serve=not args.skip_voice_serve,
        turns=not args.skip_turns,
    )
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
