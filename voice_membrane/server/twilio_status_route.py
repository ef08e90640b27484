"""``GET /v1/twilio/status``: Twilio's status callbacks for the calls
``voice-membrane call`` places, each logged as one ``call_status`` line.

Twilio requests it at each call progress event the call asked for (initiated,
ringing, answered, completed) with the call's parameters (``CallSid``,
``CallStatus``, ``CallDuration``, ``SipResponseCode``, …). The call asks for
``StatusCallbackMethod=GET``: the server's HTTP side is websockets' handshake
parser, which reads GET requests only (no body), and Twilio signs a GET over
its full URL, query included, as it signs the voice webhook. So the gate
(``twilio_gate``, in ``server.py``) checks the signature against the public
status URL (``status_url``) followed by the query Twilio sent, before this
route runs. https://www.twilio.com/docs/voice/api/call-resource#statuscallback

What is logged is only what has a known shape (an id, a status word,
numbers), so nothing a request carries reaches the log as free text; the
callers' numbers (``From``, ``To``) are not logged.
"""

from __future__ import annotations

import re
from typing import Final

from websockets.http11 import Request, Response

from .http_routes import response
from .log import Log
from .stream_urls import https_beside, one, webhook_query
from .twilio_wire import TWILIO_PATH

STATUS_PATH: Final = TWILIO_PATH + "/status"
# Twilio's call statuses: the Call resource's, and "initiated" (its callback only).
CALL_STATUSES: Final = frozenset(
    {
        "queued",
        "initiated",
        "ringing",
        "in-progress",
        "completed",
        "busy",
        "failed",
        "no-answer",
        "canceled",
    }
)
_CALL_SID = re.compile(r"[A-Za-z0-9]{1,64}")
# Optional parameters logged when they have their shape: (query name, log field, pattern).
_LOGGED: Final = (
    ("Direction", "direction", re.compile(r"[a-z-]{1,32}")),
    ("CallDuration", "duration_s", re.compile(r"[0-9]{1,9}")),
    ("SipResponseCode", "sip_response_code", re.compile(r"[0-9]{3}")),
    ("ErrorCode", "error_code", re.compile(r"[0-9]{1,6}")),
    ("AnsweredBy", "answered_by", re.compile(r"[a-z_]{1,32}")),
    ("SequenceNumber", "sequence", re.compile(r"[0-9]{1,6}")),
)


def status_url(stream_url: str) -> str:
    """The public status callback URL of a public stream URL (``wss://…/v1/twilio``)."""
    return https_beside(stream_url, "/status")


def status_route(request: Request, log: Log) -> Response:
    """Log a callback the gate let through as one ``call_status`` line (200), or
    say why it is not a status callback (400, logged too)."""
    query = webhook_query(request.path.partition("?")[2])
    if query is None:
        return _refused(log, "too many query parameters")
    call_sid, status = one(query, "CallSid"), one(query, "CallStatus")
    if call_sid is None or not _CALL_SID.fullmatch(call_sid):
        return _refused(log, "no CallSid: this is the status callback of a Twilio call")
    if status not in CALL_STATUSES:
        return _refused(log, "no known CallStatus")
    fields: dict[str, str | int] = {"call_sid": call_sid, "call_status": status}
    for name, field, shape in _LOGGED:
        value = one(query, name)
        if value is not None and shape.fullmatch(value):
            fields[field] = int(value) if value.isdigit() else value
    log("call_status", **fields)
    return response(200, "")


def _refused(log: Log, reason: str) -> Response:
    log("http_refused", status=400, path=STATUS_PATH, reason=reason)
    return response(400, reason + "\n")
