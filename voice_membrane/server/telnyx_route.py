"""Telnyx's two requests: the TeXML voice webhook (``GET /v1/telnyx/texml``)
and the media stream's upgrade (``/v1/telnyx``), each decided before any work.

The webhook answers the TeXML that streams the call to ``/v1/telnyx``
(``<Start><Stream>`` in bidirectional RTP mode, PCMU both ways, then a
``<Pause>`` that holds the call while the stream runs), with the call's own
token as a ``<Parameter>``: Telnyx hands it back in the stream's ``start``
(``custom_parameters``), where ``phone_call`` redeems it for the start's
``call_control_id`` (TeXML's ``CallSid`` is that id). The webhook must carry
Telnyx's Ed25519 signature (``telnyx_signature``). The upgrade itself is not
signed by Telnyx: it is let through (but for a browser, or an unconfigured
server reached from elsewhere), and the ``start`` decides.
https://developers.telnyx.com/docs/voice/programmable-voice/texml-verbs/stream
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final
from xml.sax.saxutils import escape

from websockets.datastructures import MultipleValuesError
from websockets.http11 import Request, Response

from ..pipeline.config import ConfigError
from .http_routes import response
from .stream_urls import one, stream_url_problem, webhook_query
from .telnyx_signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, TelnyxSignatures
from .telnyx_wire import TELNYX_PATH
from .twilio_call_token import CALL_TOKEN_PARAMETER, CallTokens

TEXML_PATH: Final = TELNYX_PATH + "/texml"
PIPELINE_PARAMETER: Final = "pipeline"
# The call is held this long at most after its stream started: closing the
# stream does not hang a TeXML call up, the caller or the pause's end does.
HOLD_S: Final = 3600
_CALL_ID = re.compile(r"[A-Za-z0-9:_-]{1,128}")
_PIPELINE = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def stream_texml(url: str, pipeline: str | None = None, **parameters: str) -> str:
    """The TeXML document; ``ValueError`` (one line) for a URL Telnyx cannot use."""
    if problem := url_problem(url):
        raise ValueError(problem)
    params: Mapping[str, str] = (
        {PIPELINE_PARAMETER: pipeline, **parameters} if pipeline is not None else parameters
    )
    inner = "".join(
        f"<Parameter name={_attr(name)} value={_attr(value)}/>" for name, value in params.items()
    )
    stream = (
        f'<Stream url={_attr(url)} track="inbound_track" codec="PCMU" '
        'bidirectionalMode="rtp" bidirectionalCodec="PCMU" bidirectionalSamplingRate="8000">'
        f"{inner}</Stream>"
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<Response><Start>{stream}</Start><Pause length="{HOLD_S}"/></Response>\n'
    )


def url_problem(url: str) -> str | None:
    return stream_url_problem(
        url,
        tls_note=" (Telnyx connects over TLS)",
        query_note=": values travel as <Parameter>s",
    )


def telnyx_check(
    public_key: str | None, url: str | None, token: str | None
) -> TelnyxSignatures | None:
    """Telnyx's signature check, or None (Telnyx calls from this machine only);
    ``ConfigError`` (one line) for a configuration that could check no call."""
    if public_key is None:
        if url is not None:
            raise ConfigError("--telnyx-url without TELNYX_PUBLIC_KEY: no call could be checked")
        return None
    if token is None:
        raise ConfigError(
            "TELNYX_PUBLIC_KEY needs the sessions' token too (VOICE_MEMBRANE_TOKEN): it "
            "keys each Telnyx call's token (docs/telephony.md)"
        )
    try:
        return TelnyxSignatures(public_key)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def telnyx_tokens(token: str) -> CallTokens:
    # (a key of its own, derived from the sessions' token: a Telnyx call token is
    # no session token, nor a Twilio one)
    return CallTokens(
        "telnyx call tokens\x00" + token,
        answer="serve's TeXML (/v1/telnyx/texml)",
        call_id="call_control_id",
    )


def texml_route(
    request: Request,
    stream_url: str,
    signatures: TelnyxSignatures | None,
    tokens: CallTokens | None,
    now: float,
) -> Response | str:
    """The call's TeXML (200), or why not: a ``str`` is a refusal for the
    caller to log and count (403), a ``Response`` a request that is not a
    call (400). Without ``signatures`` (a local server) nothing is checked."""
    if signatures is not None:
        try:
            signature = request.headers.get(SIGNATURE_HEADER)
            timestamp = request.headers.get(TIMESTAMP_HEADER)
        except MultipleValuesError:
            return "a header is repeated"
        if why := signatures.refusal(signature, timestamp, b"", now):
            return why
    query = webhook_query(request.path.partition("?")[2])
    if query is None:
        return response(400, "too many query parameters\n")
    call_id = one(query, "CallSid")
    if call_id is None or not _CALL_ID.fullmatch(call_id):
        return response(400, "no CallSid: this is the TeXML voice webhook Telnyx requests\n")
    pipeline = one(query, PIPELINE_PARAMETER)
    if pipeline is not None and not _PIPELINE.fullmatch(pipeline):
        return response(400, "?pipeline= names a pipeline (letters, digits, _ . -)\n")
    parameters = {} if tokens is None else {CALL_TOKEN_PARAMETER: tokens.issue(call_id, now)}
    try:
        texml = stream_texml(stream_url, pipeline, **parameters)
    except ValueError as exc:
        return response(400, f"{exc}\n")
    return response(200, texml, "text/xml; charset=utf-8")


def _attr(value: str) -> str:
    return '"' + escape(value, {'"': "&quot;"}) + '"'
