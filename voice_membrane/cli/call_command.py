"""``voice-membrane call +NUMBER``: an outbound phone call to a pipeline, placed
through Twilio's REST API (docs/telephony.md, "Outbound calls").

Everything is checked before any request (the numbers, serve's address, the
credentials), then serve's ``/readyz`` is asked, so that no call rings into a
server that is not there; then the call is placed, its SID and status printed,
and with ``--wait`` its status followed until it ends (Ctrl-C hangs it up).
Every failure is one line on stderr, with no secret in it.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Final, NoReturn

from ..infra.redact import quote, redact, remember
from ..vendors.credentials import base_url_problem
from .outbound_plan import (
    BASE_URL_VARIABLE,
    FROM_VARIABLE,
    OutboundCall,
    PlanError,
    credentials_from,
    outbound_call,
)
from .twilio_rest import CallState, failure_line, fetch_call, hang_up, place_call, twilio_client

READY_TIMEOUT_S: Final = 10.0
POLL_S: Final = 1.0  # --wait: how often the call's status is fetched
ENDED: Final = frozenset({"completed", "busy", "failed", "no-answer", "canceled"})
INTERRUPTED_EXIT: Final = 130


def add_call(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    call = commands.add_parser(
        "call",
        help="call a phone number through Twilio and connect it to a running serve",
        description="Place an outbound call with Twilio's REST API: when the callee answers, "
        "Twilio fetches the call's TwiML from serve's voice webhook (URL/v1/twilio/twiml) "
        "and streams the call to serve's /v1/twilio; its progress goes to serve's "
        "URL/v1/twilio/status, logged as call_status lines. Credentials from the "
        "environment: TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN (or TWILIO_API_KEY and "
        "TWILIO_API_SECRET). Exit 0 once placed (with --wait: once completed), 1 on an "
        "error or a call that did not connect, 130 on Ctrl-C (docs/telephony.md).",
    )
    call.add_argument("number", metavar="+NUMBER", help="the number to call, E.164 (+14155550123)")
    call.add_argument(
        "--from",
        dest="from_",
        metavar="+NUMBER",
        help=f"the caller: one of the account's Twilio numbers (default ${FROM_VARIABLE})",
    )
    call.add_argument(
        "--url",
        required=True,
        metavar="URL",
        help="serve's public https:// address, the one Twilio reaches it at, e.g. "
        "https://voice.example.com (serve's --twilio-url is wss://voice.example.com/v1/twilio)",
    )
    call.add_argument("--pipeline", metavar="NAME", help="the pipeline the call talks to")
    call.add_argument(
        "--wait",
        action="store_true",
        help="follow the call's status until it ends; Ctrl-C hangs up",
    )


def run_call(args: argparse.Namespace) -> None:
    environ = os.environ
    try:
        from_ = args.from_ or environ.get(FROM_VARIABLE)
        if not from_:
            raise PlanError(
                f"no caller number: give --from +NUMBER (one of the account's Twilio "
                f"numbers) or set {FROM_VARIABLE}"
            )
        call = outbound_call(args.number, from_, args.url, args.pipeline)
        credentials = credentials_from(environ)
        base_url = environ.get(BASE_URL_VARIABLE) or None
        if base_url is not None and (problem := base_url_problem(base_url)):
            raise PlanError(f"{BASE_URL_VARIABLE} {quote(base_url)}: {problem}")
    except PlanError as exc:
        _fail(str(exc))
    remember(*credentials.secrets)  # masked in any line from here on
    try:
        client = twilio_client(credentials, base_url)
    except ImportError:
        _fail("Twilio's SDK is not installed: pip install 'voice-membrane[phone]'")
    if problem := serve_problem(call):
        _fail(f"{problem}; no call placed")
    try:
        state = place_call(client, call)
    except Exception as exc:
        _fail_if_twilio(exc, base_url, "no call placed")
        raise
    _say(state)
    if args.wait:
        _follow(client, state, base_url)


def serve_problem(call: OutboundCall) -> str | None:
    """Why serve does not take calls at ``call``'s address (its ``/readyz``), or None."""
    url = call.ready_url
    try:
        with urllib.request.urlopen(url, timeout=READY_TIMEOUT_S) as answer:
            status = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return f"serve does not answer at {url} ({_reason(reason)}): is it running there?"
    if status == 200:
        return None
    if status == 503:
        return f"serve at {url} is draining (HTTP 503): it takes no new call"
    if status == 421:
        return f"serve at {url} does not answer to that host name (HTTP 421): --allow-host"
    return f"serve does not answer at {url} (HTTP {status}): is it running there?"


def _follow(client: Any, state: CallState, base_url: str | None) -> NoReturn:
    """Each change of the call's status until it ends; Ctrl-C hangs it up."""
    try:
        while state.status not in ENDED:
            time.sleep(POLL_S)
            try:
                now = fetch_call(client, state.sid)
            except Exception as exc:
                _fail_if_twilio(exc, base_url, f"call {state.sid} goes on")
                raise
            if now.status != state.status:
                _say(now)
            state = now
    except KeyboardInterrupt:
        try:
            ended = hang_up(client, state.sid)
        except Exception as exc:
            _fail_if_twilio(exc, base_url, f"interrupted: call {state.sid} was not hung up")
            raise
        _say(ended)
        print(f"voice-membrane call: interrupted: hung up call {state.sid}", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)
    sys.exit(0 if state.status == "completed" else 1)


def _say(state: CallState) -> None:
    after = (
        f" after {state.duration_s} s" if state.status == "completed" and state.duration_s else ""
    )
    print(f"call {state.sid}: {state.status}{after}", flush=True)


def _reason(reason: object) -> str:
    if isinstance(reason, socket.timeout | TimeoutError):
        return f"no answer within {READY_TIMEOUT_S:g} s"
    if isinstance(reason, OSError) and reason.strerror:
        return str(reason.strerror)
    return " ".join(str(reason).split())[:200] or type(reason).__name__


def _fail_if_twilio(exc: Exception, base_url: str | None, then: str) -> None:
    line = failure_line(exc, base_url)
    if line is not None:
        _fail(f"{line}; {then}")


def _fail(line: str) -> NoReturn:
    sys.exit(redact(f"voice-membrane call: {line}"))
