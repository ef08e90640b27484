"""``voice-membrane twiml``: print the TwiML that points a Twilio number at ``serve``."""

from __future__ import annotations

import argparse
import sys


def add_twiml(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    twiml = commands.add_parser(
        "twiml",
        help="print the TwiML that connects a Twilio call to serve's /v1/twilio",
        description="Print a <Connect><Stream> TwiML document for a TwiML Bin or a voice "
        "webhook's answer: Twilio then streams the call to URL (docs/telephony.md).",
    )
    twiml.add_argument(
        "--url",
        required=True,
        metavar="URL",
        help="the public WebSocket URL Twilio connects to, e.g. wss://voice.example.com/v1/twilio",
    )
    twiml.add_argument("--pipeline", metavar="NAME", help="the pipeline the call uses (by name)")


def run_twiml(args: argparse.Namespace) -> None:
    from ..server.twiml import stream_twiml  # here: the server package loads the engines

    try:
        sys.stdout.write(stream_twiml(args.url, args.pipeline))
    except ValueError as exc:
        sys.exit(f"voice-membrane twiml: {exc}")
