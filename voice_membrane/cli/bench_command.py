"""The ``bench`` command: first-audio latency per pipeline, voice to voice
over spoken files, or a phone route called by the fake Twilio caller."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from .common import add_otel, exit_if_user_error, start_tracing, token_option

TURNS = 20  # counted turns per target (--twilio has its own default: questions per call)


def add_bench(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = commands.add_parser(
        "bench",
        help="measure first-audio latency per pipeline, per stage, against the ideal",
        description="Run N turns (after K warm-up turns, not counted) on every pipeline, or "
        "every --llm x --tts combination, on the same prompts, and show p50/p95/p99/max of "
        "every stamp, the LLM and TTS shares, what the pipeline added and the excess over "
        "the ideal first audio (docs/bench.md).",
    )
    bench.add_argument(
        "--pipeline",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a pipeline file to measure (repeatable; default pipelines/local.toml); "
        "with --url, the name of a pipeline the server allows",
    )
    bench.add_argument(
        "--url",
        metavar="ws://HOST:PORT/v1/session",
        help="measure a running serve endpoint as its client sees it",
    )
    bench.add_argument(
        "--twilio",
        metavar="ws://HOST:PORT/v1/twilio",
        help="call a running serve's phone route with the fake Twilio caller: voice to voice "
        "per question, and barge-in (onset → clear) by saying stop over each answer",
    )
    bench.add_argument(
        "--twilio-sign-url",
        metavar="wss://HOST/v1/twilio",
        help="with --twilio: sign the calls (with $TWILIO_AUTH_TOKEN) for this public URL, "
        "serve's --twilio-url, rather than the address called (a rehearsal on loopback)",
    )
    bench.add_argument(
        "--token",
        metavar="TOKEN",
        help="the server's token for --url (default $VOICE_MEMBRANE_TOKEN)",
    )
    bench.add_argument(
        "--llm", action="append", default=[], metavar="SPEC", help="an LLM spec (repeatable)"
    )
    bench.add_argument(
        "--tts", action="append", default=[], metavar="SPEC", help="a TTS spec (repeatable)"
    )
    bench.add_argument(
        "--prompts", type=Path, metavar="FILE", help='one prompt a line, or JSONL {"prompt": …}'
    )
    bench.add_argument(
        "--turns",
        type=int,
        metavar="N",
        help=f"counted turns ({TURNS}; --twilio: questions per call, 3)",
    )
    bench.add_argument(
        "--warmup", type=int, default=1, metavar="K", help="uncounted turns per session (1)"
    )
    bench.add_argument(
        "--concurrency", type=int, default=1, metavar="C", help="sessions at once (1)"
    )
    bench.add_argument("--json", type=Path, metavar="PATH", help="write every turn's report")
    bench.add_argument(
        "--html",
        type=Path,
        metavar="PATH",
        help="write a self-contained page: waterfalls, distributions, tables (the bench extra)",
    )
    bench.add_argument(
        "--scripted",
        action="store_true",
        help="fake LLM and TTS servers with fixed timings: what voice_membrane itself adds "
        "(with --input: the fake Deepgram too)",
    )
    bench.add_argument(
        "--input",
        type=Path,
        nargs="*",
        metavar="FILE.wav",
        help="measure voice-to-voice latency hearing these files or folders, played in real "
        "time (none given: the shipped spoken questions); --pipeline default local-voice.toml",
    )
    add_otel(bench)


def _voice_bench(args: argparse.Namespace) -> list[Any]:
    from ..bench.command import console
    from ..bench.voice_command import VoiceBenchOptions, run_voice_bench, voice_targets
    from ..pipeline.config import ConfigError

    if args.url or args.llm or args.tts or args.prompts:
        exit_if_user_error(
            "bench", ConfigError("--input measures pipelines: drop --url, --llm, --tts, --prompts")
        )
    options = VoiceBenchOptions(
        inputs=args.input,
        pipelines=args.pipeline,
        scripted=args.scripted,
        json=args.json,
        html=args.html,
        settings={"input": [str(p) for p in args.input], "scripted": args.scripted},
    )
    inputs = options.check()
    with voice_targets(options, inputs) as targets:
        return anyio.run(partial(run_voice_bench, options, inputs, targets, console()))


def _measured(measure: Callable[[], list[Any]]) -> None:
    """The runs ``measure`` made; Ctrl-C: what was finished is printed and written,
    then one line and status 130; a user's error: one line; nothing measured: 1."""
    from ..bench.command import BenchInterrupted

    try:
        runs = measure()
    except BenchInterrupted as exc:
        print(f"voice-membrane bench: {exc}", file=sys.stderr, flush=True)
        sys.exit(130)
    except Exception as exc:
        exit_if_user_error("bench", exc)
        raise
    if all(run.error is not None for run in runs):
        sys.exit(1)  # nothing could be measured: each target's reason is printed


def bench(args: argparse.Namespace) -> None:
    if args.twilio is not None:
        from ..bench.phone_command import phone_bench_main

        phone_bench_main(args, exit_if_user_error)
        return
    if args.input is not None:
        _measured(partial(_voice_bench, args))
        return
    from ..bench.command import BenchOptions, bench_prompts, console, run_bench, targets_for
    from ..infra.redact import remember

    turns = TURNS if args.turns is None else args.turns
    token = token_option(args.token, "bench")
    remember(token)  # the server's token: masked in every line and report the bench writes

    options = BenchOptions(
        pipelines=args.pipeline,
        llms=args.llm,
        ttss=args.tts,
        prompts=args.prompts,
        turns=turns,
        warmup=args.warmup,
        concurrency=args.concurrency,
        json=args.json,
        html=args.html,
        scripted=args.scripted,
        url=args.url,
        token=token or None,
        settings={
            "url": args.url,
            "turns": turns,
            "warmup": args.warmup,
            "concurrency": args.concurrency,
            "scripted": args.scripted,
            "prompts": None if args.prompts is None else str(args.prompts),
        },
    )
    try:
        options.check()
        prompts = bench_prompts(options)
    except Exception as exc:
        exit_if_user_error("bench", exc)
        raise

    def measure() -> list[Any]:
        with targets_for(options) as targets:
            return anyio.run(partial(run_bench, options, prompts, targets, console()))

    shutdown_tracing = start_tracing("bench", args)
    try:
        _measured(measure)
    finally:
        shutdown_tracing()
