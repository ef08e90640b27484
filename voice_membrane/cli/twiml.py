"""``voice-membrane twiml``: print the TwiML that points a Twilio number at ``serve``."""

from __future__ import annotations

import argparse
import os
import sys
import time

from .serve_command import TWILIO_TOKEN_VARIABLE


def add_twiml(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    twiml = commands.add_parser(
        "twiml",
        help="print the TwiML that connects a Twilio call to serve's /v1/twilio",
        description="Print a <Connect><Stream> TwiML document: Twilio then streams the call "
        "to URL. serve answers it itself, per call, at /v1/twilio/twiml (the number's voice "
        "webhook, HTTP GET); with $TWILIO_AUTH_TOKEN serve takes a call only with the call "
        "token of its own TwiML, which --call-sid adds (docs/telephony.md).",
    )
    twiml.add_argument(
        "--url",
        required=True,
        metavar="URL",
        help="the public WebSocket URL Twilio connects to, e.g. wss://voice.example.com/v1/twilio",
    )
    twiml.add_argument("--pipeline", metavar="NAME", help="the pipeline the call uses (by name)")
    twiml.add_argument(
        "--call-sid",
        metavar="SID",
        help="the call's CallSid: adds its call token, made with $TWILIO_AUTH_TOKEN "
        "(for a voice webhook of your own)",
    )


def run_twiml(args: argparse.Namespace) -> None:
    # here: the server package loads the engines
    from ..server.twilio_call_token import CALL_TOKEN_PARAMETER, CallTokens
    from ..server.twiml import stream_twiml

    parameters = {}
    if args.call_sid is not None:
        auth_token = os.environ.get(TWILIO_TOKEN_VARIABLE)
        if not auth_token:
            sys.exit(f"voice-membrane twiml: --call-sid needs ${TWILIO_TOKEN_VARIABLE}")
        parameters[CALL_TOKEN_PARAMETER] = CallTokens(auth_token).issue(args.call_sid, time.time())
    try:
        sys.stdout.write(stream_twiml(args.url, args.pipeline, **parameters))
    except ValueError as exc:
        sys.exit(f"voice-membrane twiml: {exc}")
