"""``GET /v1/twilio/twiml``: the voice webhook a Twilio number calls when a call
comes in; it answers the TwiML that streams the call to ``/v1/twilio``.

Twilio requests it (set to HTTP GET in the number's "A call comes in") with
the call's parameters in the query string (``CallSid``, ``From``, …) and signs
the whole URL, which the server checks as it checks the stream's upgrade
(``twilio_gate``, in ``server.py``), against the public webhook: the stream's public URL
(``--twilio-url``) with ``https://`` and ``/twiml`` appended (without one,
``https://`` + the Host + the path). The TwiML carries the call's token
(``twilio_call_token``), which the stream's ``start`` must bring back, and the
pipeline named by the webhook's own ``?pipeline=`` if it has one.
"""

from __future__ import annotations

import re
from typing import Final

from websockets.http11 import Request, Response

from .http_routes import response
from .stream_urls import https_beside, one, webhook_query
from .twilio_call_token import CALL_TOKEN_PARAMETER, CallTokens
from .twilio_wire import TWILIO_PATH
from .twiml import stream_twiml

TWIML_PATH: Final = TWILIO_PATH + "/twiml"
_CALL_SID = re.compile(r"[A-Za-z0-9]{1,64}")
_PIPELINE = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def webhook_url(stream_url: str) -> str:
    """The public voice webhook of a public stream URL (``wss://…/v1/twilio``)."""
    return https_beside(stream_url, "/twiml")


def twiml_route(
    request: Request, stream_url: str, tokens: CallTokens | None, now: float
) -> Response:
    """The call's TwiML for a request the gate let through (``twilio_gate``,
    against ``webhook_url(stream_url)``), or why not (400: not a call)."""
    query = webhook_query(request.path.partition("?")[2])
    if query is None:
        return response(400, "too many query parameters\n")
    call_sid = one(query, "CallSid")
    if call_sid is None or not _CALL_SID.fullmatch(call_sid):
        return response(400, "no CallSid: this is the voice webhook Twilio requests for a call\n")
    pipeline = one(query, "pipeline")
    if pipeline is not None and not _PIPELINE.fullmatch(pipeline):
        return response(400, "?pipeline= names a pipeline (letters, digits, _ . -)\n")
    parameters = {} if tokens is None else {CALL_TOKEN_PARAMETER: tokens.issue(call_sid, now)}
    try:
        twiml = stream_twiml(stream_url, pipeline, **parameters)
    except ValueError as exc:  # the Host makes no stream URL Twilio can use
        return response(400, f"{exc}\n")
    return response(200, twiml, "text/xml; charset=utf-8")
