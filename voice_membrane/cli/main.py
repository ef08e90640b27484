"""The `voice-membrane` command."""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from ..infra.exception_groups import leaves
from ..providers.replay import RecordingError, load_recording
from .twiml import add_twiml, run_twiml

# The repository's recorded streams (an editable install runs from the repository).
FIXTURES = Path(__file__).resolve().parents[2] / "audio_fixtures" / "streams"
DEFAULT_RECORDING = FIXTURES / "weather_tool_turn.jsonl"
TOKEN_VARIABLE = "VOICE_MEMBRANE_TOKEN"
TWILIO_TOKEN_VARIABLE = "TWILIO_AUTH_TOKEN"


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="voice-membrane", description="Make an LLM speak in real time."
    )
    parser.add_argument("--version", action="version", version=f"voice-membrane {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="replay a recorded LLM stream and show what would be spoken, and when",
        description="Replay a recorded LLM stream through the parser and the speech "
        "chunker: hidden blocks (thinking, tool calls, tool results) are shown but never "
        "spoken; visible text is cut into the pieces a TTS engine would receive.",
    )
    demo.add_argument(
        "recording",
        nargs="?",
        type=Path,
        default=DEFAULT_RECORDING,
        help=f"a recording (JSON Lines; default {DEFAULT_RECORDING})",
    )
    demo.add_argument(
        "--speed",
        type=float,
        default=0.0,
        help="replay speed: 1 = recorded timing, 0 = as fast as possible (default 0)",
    )
    run = commands.add_parser(
        "run",
        help="a spoken assistant: type (or pass) a prompt, hear the answer",
        description="Answer prompts out loud through a pipeline (LLM → parser → chunker → "
        "TTS → sink) and report the latency of every stage. Without --prompt: an "
        "interactive loop (Ctrl-C interrupts the speech, Ctrl-D quits). Flags override "
        "the pipeline file.",
    )
    run.add_argument(
        "--pipeline", type=Path, help="pipeline file, or a shipped pipeline's name (default local)"
    )
    spoken = run.add_mutually_exclusive_group()
    spoken.add_argument("--prompt", help="answer this prompt once and exit")
    spoken.add_argument(
        "--input",
        type=Path,
        metavar="FILE.wav",
        help="listen to this recording, played in real time as if spoken, and answer it",
    )
    spoken.add_argument(
        "--listen", action="store_true", help="listen to the microphone and answer by voice"
    )
    run.add_argument(
        "--stt",
        help="speech to text when listening: pocketsphinx | deepgram:MODEL | openai:MODEL "
        "| whisper:PATH",
    )
    run.add_argument(
        "--llm", help="local | replay:PATH | anthropic:MODEL | openai:MODEL | gemini:MODEL"
    )
    run.add_argument(
        "--formatter",
        help="native (chat mode) | anthropic-xml | chatml | completions | gemini-prefill",
    )
    run.add_argument(
        "--tts",
        help="piper | espeak | elevenlabs:VOICE_ID | elevenlabs-http:VOICE_ID | openai:VOICE",
    )
    run.add_argument("--out", metavar="FILE.wav", help="write the audio to this WAV file")
    run.add_argument("--metrics-json", type=Path, metavar="PATH", help="write latency report(s)")
    run.add_argument("--events-jsonl", type=Path, metavar="PATH", help="write every event")
    run.add_argument(
        "--show-hidden", action="store_true", help="also print thinking and tool blocks"
    )
    run.add_argument(
        "--debug-dir",
        type=Path,
        metavar="DIR",
        help="write every provider request and response there (sanitized, no keys)",
    )
    run.add_argument(
        "--image",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="send this image (PNG, JPEG, GIF, WebP) with the first prompt (repeatable)",
    )
    _add_otel(run)
    serve = commands.add_parser(
        "serve",
        help="serve spoken sessions over a WebSocket, with a browser page",
        description="Serve sessions over a WebSocket (docs/websocket-protocol.md), the "
        "browser page at /, Prometheus metrics at /metrics, /healthz and /readyz. SIGTERM "
        "drains: running turns finish, new sessions are refused.",
    )
    serve.add_argument(
        "--pipeline",
        type=Path,
        action="append",
        help="a pipeline file clients may use, by its name (the file's stem); repeatable, "
        "the first is the default (default pipelines/local.toml)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (8765; 0: any free port)")
    serve.add_argument(
        "--token", help="the token clients must present (default: env VOICE_MEMBRANE_TOKEN)"
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to connect, e.g. https://app.example.com (repeatable)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="a Host name answered besides the listener's own, e.g. a proxy's "
        "voice.example.com (repeatable; docs/websocket-protocol.md)",
    )
    serve.add_argument(
        "--send-buffer-ms",
        type=float,
        default=200.0,
        metavar="MS",
        help="the kernel send buffer of each session's socket, in ms of its audio "
        "(200: the lead; more for round trips over ~300 ms)",
    )
    serve.add_argument(
        "--drain-timeout", type=float, default=30.0, metavar="S", help="on SIGTERM (30)"
    )
    serve.add_argument(
        "--idle-timeout", type=float, default=300.0, metavar="S", help="close idle sessions (300)"
    )
    serve.add_argument(
        "--max-sessions",
        type=int,
        default=50,  # server.state.DEFAULT_MAX_SESSIONS, not imported: --help stays fast
        metavar="N",
        help="refuse more sessions at once with 1013, before building anything for them "
        "(50: what one process sustains on 2 cores, docs/benchmarks.md; 0: no limit)",
    )
    serve.add_argument(
        "--workers",
        type=_workers_option,
        default="auto",
        metavar="N",
        help="worker processes on the port, each its own event loop (auto: one per core, "
        "or 1 when a pipeline runs an engine on this machine; docs/serve.md)",
    )
    serve.add_argument(
        "--debug-audio-dir",
        type=Path,
        metavar="DIR",
        help="write each listening session's input audio to DIR/SESSION.wav, as the "
        "recognizer heard it (for debugging recognition; off: the voice is never stored)",
    )
    serve.add_argument(
        "--log-format",
        choices=("auto", "json", "text"),  # server.log.LOG_FORMATS, not imported: --help stays fast
        default="auto",
        help="stderr's log lines: text on a terminal, JSON otherwise (auto)",
    )
    serve.add_argument(
        "--twilio-url",
        metavar="URL",
        help="the public wss:// URL Twilio calls for /v1/twilio, as in the TwiML (the "
        "signature covers it; default: wss:// + the request's Host); the account's auth "
        f"token comes from env {TWILIO_TOKEN_VARIABLE} (docs/telephony.md)",
    )
    serve.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="serve settings in TOML: [sessions] store, grace_s, max_bytes (docs/serve.md)",
    )
    serve.add_argument(
        "--session-store",
        metavar="URL",
        help="where sessions wait to be resumed: memory (default) or redis://HOST:PORT/DB, "
        "shared by every process and replica (overrides the config file's)",
    )
    _add_otel(serve)
    _add_bench(commands)
    add_twiml(commands)
    return parser


def _add_otel(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--otel",
        action="store_true",
        help="send each turn's trace to an OTLP/HTTP collector, configured by the "
        "OTEL_* variables (needs the otel extra; docs/telemetry.md)",
    )


def _start_tracing(command: str, args: argparse.Namespace) -> Callable[[], None]:
    """``--otel``: the tracer provider's shutdown (it flushes); a no-op without it."""
    if not args.otel:
        return lambda: None
    from ..telemetry.setup import TelemetryError, setup_tracing

    try:
        return setup_tracing()
    except TelemetryError as exc:
        sys.exit(f"voice-membrane {command}: {exc}")


def _add_bench(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    bench.add_argument("--turns", type=int, default=20, metavar="N", help="counted turns (20)")
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
    _add_otel(bench)


def _voice_bench(args: argparse.Namespace) -> None:
    from ..bench.command import BenchInterrupted, console
    from ..bench.voice_command import VoiceBenchOptions, run_voice_bench, voice_targets
    from ..pipeline.config import ConfigError

    if args.url or args.llm or args.tts or args.prompts:
        _exit_if_user_error(
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
    try:
        inputs = options.check()
        with voice_targets(options, inputs) as targets:
            runs = anyio.run(partial(run_voice_bench, options, inputs, targets, console()))
    except BenchInterrupted as exc:  # Ctrl-C: the files heard are printed and written
        print(f"voice-membrane bench: {exc}", file=sys.stderr, flush=True)
        sys.exit(130)
    except Exception as exc:
        _exit_if_user_error("bench", exc)
        raise
    if all(run.error is not None for run in runs):
        sys.exit(1)


def _bench(args: argparse.Namespace) -> None:
    if args.twilio is not None:
        from ..bench.phone_command import phone_bench_main

        phone_bench_main(args, _exit_if_user_error)
        return
    if args.input is not None:
        _voice_bench(args)
        return
    from ..bench.command import (
        BenchInterrupted,
        BenchOptions,
        bench_prompts,
        console,
        run_bench,
        targets_for,
    )
    from ..infra.redact import remember

    token = _token_option(args.token, "bench")
    remember(token)  # the server's token: masked in every line and report the bench writes

    options = BenchOptions(
        pipelines=args.pipeline,
        llms=args.llm,
        ttss=args.tts,
        prompts=args.prompts,
        turns=args.turns,
        warmup=args.warmup,
        concurrency=args.concurrency,
        json=args.json,
        html=args.html,
        scripted=args.scripted,
        url=args.url,
        token=token or None,
        settings={
            "url": args.url,
            "turns": args.turns,
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
        _exit_if_user_error("bench", exc)
        raise
    shutdown_tracing = _start_tracing("bench", args)
    try:
        with targets_for(options) as targets:
            runs = anyio.run(partial(run_bench, options, prompts, targets, console()))
    except BenchInterrupted as exc:  # Ctrl-C: the turns finished are printed and written
        print(f"voice-membrane bench: {exc}", file=sys.stderr, flush=True)
        sys.exit(130)
    except Exception as exc:
        _exit_if_user_error("bench", exc)
        raise
    finally:
        shutdown_tracing()
    if all(run.error is not None for run in runs):
        sys.exit(1)  # nothing could be measured: each target's reason is printed


def _serve(args: argparse.Namespace, argv: Sequence[str]) -> None:
    from ..server.log import make_log
    from ..server.run import run_server, store_warning, workers_wanted

    token = _token_option(args.token, "serve")
    for flag, value in (
        ("--send-buffer-ms", args.send_buffer_ms),
        ("--drain-timeout", args.drain_timeout),
        ("--idle-timeout", args.idle_timeout),
    ):
        if not value > 0:
            sys.exit(f"voice-membrane serve: {flag} must be > 0")
    if args.max_sessions < 0:
        sys.exit("voice-membrane serve: --max-sessions must be ≥ 0 (0: no limit)")
    if not 0 <= args.port <= 65535:
        sys.exit("voice-membrane serve: --port must be 0 to 65535")
    sessions = _session_settings(args)
    pipelines = args.pipeline or [_default_pipeline()]
    try:
        workers = workers_wanted(args.workers, pipelines)
    except Exception as exc:
        _exit_if_user_error("serve", exc)
        raise
    if workers > 1:
        _serve_group(args, workers, pipelines, token, argv, store_warning(sessions.store, workers))
        return
    shutdown_tracing = _start_tracing("serve", args)
    try:
        interrupted = anyio.run(
            partial(
                run_server,
                pipelines,
                host=args.host,
                port=args.port,
                token=token or None,
                allow_origins=args.allow_origin,
                allow_hosts=args.allow_host,
                send_buffer_s=args.send_buffer_ms / 1000,
                drain_timeout_s=args.drain_timeout,
                idle_timeout_s=args.idle_timeout,
                max_sessions=args.max_sessions or None,  # 0: no limit
                debug_audio_dir=args.debug_audio_dir,
                log=make_log(args.log_format),
                twilio_auth_token=os.environ.get(TWILIO_TOKEN_VARIABLE) or None,
                twilio_url=args.twilio_url,
                sessions=sessions,
            )
        )
    except Exception as exc:
        _exit_if_user_error("serve", exc)
        raise
    finally:
        shutdown_tracing()
    if interrupted:
        sys.exit(130)  # stopped by Ctrl-C (SIGTERM's drain exits 0)


def _workers_option(value: str) -> str | int:
    if value == "auto":
        return value
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError("--workers is auto or a number ≥ 1")
    return int(value)


def _serve_group(
    args: argparse.Namespace,
    workers: int,
    pipelines: list[Path],
    token: str | None,
    argv: Sequence[str],
    notice: str | None,
) -> None:
    """``serve --workers N``: this process supervises N ``serve`` processes (the
    same command) on one port (server/workers.py); ``notice``, said on stderr
    once they listen."""
    from ..server.log import make_log
    from ..server.run import run_group
    from ..server.workers import GroupError

    command = [sys.executable, "-m", "voice_membrane.cli", *_without_token(argv)]
    try:
        code = anyio.run(
            partial(
                run_group,
                pipelines,
                workers,
                command,
                host=args.host,
                port=args.port,
                token=token or None,
                allow_hosts=args.allow_host,
                drain_timeout_s=args.drain_timeout,
                log=make_log(args.log_format),
                notice=notice,
            )
        )
    except GroupError as exc:  # quiet: the worker's own line said why
        sys.exit(1 if exc.quiet else f"voice-membrane serve: {exc}")
    except Exception as exc:
        _exit_if_user_error("serve", exc)
        raise
    sys.exit(code)


def _without_token(argv: Sequence[str]) -> list[str]:
    """The workers get the token in their environment, not in ``ps``."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--token":
            skip = True
        elif not arg.startswith("--token="):
            kept.append(arg)
    return kept


def _session_settings(args: argparse.Namespace) -> Any:
    """The config file's ``[sessions]``, with ``--session-store`` over its store."""
    from ..pipeline.config import ConfigError
    from ..server.serve_config import ServeConfig, check_store, load_serve_config

    try:
        config = ServeConfig() if args.config is None else load_serve_config(args.config)
    except ConfigError as exc:
        sys.exit(f"voice-membrane serve: {_one_line(exc)}")
    sessions = config.sessions
    if args.session_store is not None:
        try:
            store = check_store(args.session_store)
        except ValueError as exc:
            sys.exit(f"voice-membrane serve: --session-store: {exc}")
        sessions = sessions.model_copy(update={"store": store})
    return sessions


def _token_option(given: str | None, command: str) -> str | None:
    """``--token``, else ``$VOICE_MEMBRANE_TOKEN``. One given on the command line is
    in every user's ``ps``: say so, once, on stderr."""
    import os

    if given is None:
        return os.environ.get(TOKEN_VARIABLE)
    print(
        f"voice-membrane {command}: warning: --token shows the token to every user of "
        f"this machine (ps, /proc); set {TOKEN_VARIABLE} instead",
        file=sys.stderr,
        flush=True,
    )
    return given


def _default_pipeline() -> Path:
    from ..pipeline.config import DEFAULT_PIPELINE  # loaded when used: --help stays fast

    return DEFAULT_PIPELINE


def _run(args: argparse.Namespace) -> None:
    from .run import NO_SPEECH_EXIT, resolve_config, run_assistant, said_nothing

    prompt: str | None = args.prompt
    if prompt is not None and not _is_utf8(prompt):
        sys.exit("voice-membrane run: --prompt is not UTF-8 text")
    try:
        config = resolve_config(
            args.pipeline,
            llm=args.llm,
            formatter=args.formatter,
            tts=args.tts,
            out=args.out,
            debug_dir=args.debug_dir,
            stt=args.stt,
        )
    except Exception as exc:
        _exit_if_user_error("run", exc)
        raise
    if args.input is not None or args.listen:
        _run_listening(config, args)
        return
    shutdown_tracing = _start_tracing("run", args)
    try:
        results = anyio.run(
            partial(
                run_assistant,
                config,
                prompt=prompt,
                metrics_json=args.metrics_json,
                events_jsonl=args.events_jsonl,
                show_hidden=args.show_hidden,
                images=args.image,
            )
        )
    except Exception as exc:
        _exit_if_user_error("run", exc)
        raise
    finally:
        shutdown_tracing()
    if prompt is not None and any(result.error for result in results):
        sys.exit(1)  # the error, what was spoken and the report are already printed
    if prompt is not None and any(result.interrupted for result in results):
        sys.exit(130)  # Ctrl-C cut the answer: the shell's code for it, as if killed
    if prompt is not None and any(map(said_nothing, results)):
        sys.exit(NO_SPEECH_EXIT)  # the answer said nothing (the line above says so)


def _run_listening(config: Any, args: argparse.Namespace) -> None:
    from .listen import run_listening

    shutdown_tracing = _start_tracing("run", args)
    try:
        turns = anyio.run(
            partial(
                run_listening,
                config,
                input_path=args.input,
                metrics_json=args.metrics_json,
                events_jsonl=args.events_jsonl,
            )
        )
    except Exception as exc:
        _exit_if_user_error("run", exc)
        raise
    finally:
        shutdown_tracing()
    if any(turn.result.error for turn in turns):
        sys.exit(1)


def _exit_if_user_error(command: str, exc: Exception) -> None:
    """The boundary: what a user can cause (configuration, a model or voice that
    will not load, a device, a file) exits with one line; anything else is a bug
    and the caller re-raises it with its traceback."""
    causes = leaves(exc)
    if all(isinstance(cause, _user_errors()) for cause in causes):
        sys.exit(f"voice-membrane {command}: {'; '.join(_one_line(c) for c in causes)}")


def _user_errors() -> tuple[type[Exception], ...]:
    from ..membrane.tools_mcp import McpServerError
    from ..pipeline.config import ConfigError
    from ..sinks.base import SinkError
    from ..tts.base import TtsError
    from ..vendors.errors import LlmError

    return (ConfigError, LlmError, TtsError, SinkError, McpServerError, RecordingError, OSError)


def _one_line(exc: BaseException) -> str:
    from ..infra.redact import redact

    text = str(exc) if not isinstance(exc, OSError) or not exc.strerror else _os_error(exc)
    return redact(" ".join(text.split()) or type(exc).__name__)


def _os_error(exc: OSError) -> str:
    """``[Errno 2] No such file or directory: 'x'`` as ``x: No such file or directory``."""
    return f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc.strerror)


def _is_utf8(text: str) -> bool:
    """False for text with bytes that were not UTF-8 (decoded as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _version() -> str:
    try:
        return importlib.metadata.version("voice-membrane")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "unknown"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; an unknown one is reported by its command's parser (its
    usage, not the top level's), with the option it was probably meant to be."""
    parser = _build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = _command_parsers(parser)[args.command]
        message = f"unrecognized arguments: {' '.join(unknown)}"
        options = [o for action in command._actions for o in action.option_strings]
        guess = difflib.get_close_matches(unknown[0].partition("=")[0], options, n=1)
        if unknown[0].startswith("-") and guess:
            message += f" (did you mean {guess[0]}?)"
        command.error(message)
    return args


def _command_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def main(argv: Sequence[str] | None = None) -> None:
    _quiet_reaped_children()
    try:
        _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C before a command took it over (importing, loading the model and
        # voice): one line, and the shell's code for it, never a traceback.
        sys.stderr.write("voice-membrane: interrupted\n")
        sys.exit(130)


def _quiet_reaped_children() -> None:
    """asyncio's child watcher warns on stderr ("Unknown child process pid N,
    will report returncode 255") when a child it waits for was reaped first —
    an espeak-ng process killed as Ctrl-C cancels a turn can be. The child is
    gone either way and its code is not used: the line would only break the
    one-line message a user gets on Ctrl-C (seen in 1 of about 7 runs)."""
    import logging

    class _Reaped(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return not str(record.msg).startswith("Unknown child process pid")

    logging.getLogger("asyncio").addFilter(_Reaped())


def _main(argv: Sequence[str] | None) -> None:
    args = _parse(argv)
    if args.command == "run":
        _run(args)
    elif args.command == "serve":
        _serve(args, sys.argv[1:] if argv is None else argv)
    elif args.command == "bench":
        _bench(args)
    elif args.command == "twiml":
        run_twiml(args)
    elif args.command == "demo":
        from .demo import run_demo

        if args.speed < 0:
            sys.exit("voice-membrane demo: --speed must be ≥ 0")
        try:
            recording = load_recording(args.recording)
        except RecordingError as exc:
            sys.exit(f"voice-membrane demo: {exc}")
        anyio.run(partial(run_demo, recording, speed=args.speed))


if __name__ == "__main__":
    main()
