"""Twilio's routes before any work: the media stream's upgrade (``/v1/twilio``),
the voice webhook (``/v1/twilio/twiml``) and the status callbacks of placed
calls (``/v1/twilio/status``), each checked against Twilio's signature for
its public URL; a request that is not Twilio's gets a 403 and nothing else."""

from __future__ import annotations

import time
from typing import Final

from websockets.http11 import Request, Response

from .carrier_routes import Refuse
from .log import Log
from .prometheus import RefusedLogin
from .twilio_call_token import CallTokens
from .twilio_gate import twilio_refusal
from .twilio_status_route import STATUS_PATH, status_route, status_url
from .twilio_wire import TWILIO_PATH
from .twiml_route import TWIML_PATH, twiml_route, webhook_url

PATHS: Final = (TWILIO_PATH, TWIML_PATH, STATUS_PATH)


def request(
    request: Request,
    path: str,
    host: str,
    local: bool,
    *,
    twilio_url: str | None,
    auth_token: str | None,
    call_tokens: CallTokens | None,
    log: Log,
    refuse: Refuse,
) -> Response | None:
    """The upgrade (None: go on), the webhook's or callback's answer, or the
    403. ``twilio_url``: the public stream URL (default: this Host's)."""
    stream_url = twilio_url or f"wss://{host}{TWILIO_PATH}"
    signed_for = {
        TWILIO_PATH: twilio_url,  # (None: the URL the upgrade came to)
        TWIML_PATH: webhook_url(stream_url),
        STATUS_PATH: status_url(stream_url),  # a placed call's progress (voice-membrane call)
    }[path]
    refusal = twilio_refusal(request, auth_token=auth_token, public_url=signed_for, local=local)
    if refusal is not None:
        why: RefusedLogin = "proxied" if auth_token is None and not local else "twilio_signature"
        return refuse(path, why, refusal)
    if path == TWILIO_PATH:
        return None  # the WebSocket handshake
    if path == STATUS_PATH:
        return status_route(request, log)
    return twiml_route(request, stream_url, call_tokens, time.time())  # one call's TwiML
