"""The `voice-membrane` command."""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from ..providers.replay import RecordingError, load_recording
from .bench_command import add_bench, bench
from .call_command import add_call, run_call
from .common import add_otel, exit_if_user_error, is_utf8, start_tracing
from .models import add_models, run_models
from .serve_command import add_serve, serve
from .twiml import add_twiml, run_twiml

# The repository's recorded streams (an editable install runs from the repository).
FIXTURES = Path(__file__).resolve().parents[2] / "audio_fixtures" / "streams"
DEFAULT_RECORDING = FIXTURES / "weather_tool_turn.jsonl"


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
        help="speech to text when listening: whisper (embedded, the default) | whisper:PATH "
        "| pocketsphinx | deepgram:MODEL | openai:MODEL",
    )
    run.add_argument(
        "--llm",
        help="local | local:NAME (pulled: voice-membrane models list) | local:PATH.gguf | "
        "replay:PATH | anthropic:MODEL | openai:MODEL | gemini:MODEL",
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
    add_otel(run)
    add_serve(commands)
    add_bench(commands)
    add_twiml(commands)
    add_call(commands)
    add_models(commands)
    return parser


def _run(args: argparse.Namespace) -> None:
    from .run import NO_SPEECH_EXIT, resolve_config, run_assistant, said_nothing

    prompt: str | None = args.prompt
    if prompt is not None and not is_utf8(prompt):
        sys.exit("voice-membrane run: --prompt is not UTF-8 text")
    listening = args.input is not None or args.listen
    if args.stt is not None and not listening:
        # It would be silently ignored: a typed line or a prompt is never transcribed.
        sys.exit(
            "voice-membrane run: --stt transcribes what is heard: it goes with "
            "--input FILE.wav or --listen, not a typed line or --prompt"
        )
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
        exit_if_user_error("run", exc)
        raise
    if listening:
        _run_listening(config, args)
        return
    shutdown_tracing = start_tracing("run", args)
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
        exit_if_user_error("run", exc)
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
    from .listen import ListeningInterrupted, run_listening

    shutdown_tracing = start_tracing("run", args)
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
    except ListeningInterrupted:
        # Ctrl-C with no answer playing (the user may be mid-sentence): not a
        # normal end, so the shell's code for an interrupt, as --prompt gives.
        sys.stderr.write("voice-membrane run: interrupted\n")
        sys.exit(130)
    except Exception as exc:
        exit_if_user_error("run", exc)
        raise
    finally:
        shutdown_tracing()
    if any(turn.result.error for turn in turns):
        sys.exit(1)


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
        serve(args, sys.argv[1:] if argv is None else argv)
    elif args.command == "bench":
        bench(args)
    elif args.command == "twiml":
        run_twiml(args)
    elif args.command == "call":
        run_call(args)
    elif args.command == "models":
        run_models(args)
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
