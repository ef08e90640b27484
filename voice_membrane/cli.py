"""The `voice-membrane` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import anyio

from .providers.replay import RecordingError, load_recording

# The repository's recorded streams (an editable install runs from the repository).
FIXTURES = Path(__file__).resolve().parent.parent / "audio_fixtures" / "streams"
DEFAULT_RECORDING = FIXTURES / "weather_tool_turn.jsonl"


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="voice-membrane", description="Make an LLM speak in real time."
    )
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
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _build_parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        if args.speed < 0:
            sys.exit("voice-membrane demo: --speed must be ≥ 0")
        try:
            recording = load_recording(args.recording)
        except RecordingError as exc:
            sys.exit(f"voice-membrane demo: {exc}")
        anyio.run(partial(run_demo, recording, speed=args.speed))
