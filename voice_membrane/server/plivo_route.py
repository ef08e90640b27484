"""Plivo's two requests: the answer URL (``GET /v1/plivo/answer``) and the
audio stream's upgrade (``/v1/plivo``), each decided before any work.

The answer URL, signed by Plivo (``plivo_signature``, for its public URL:
``--plivo-url`` with ``https://`` and ``/answer``), answers the Plivo XML
that streams the call to ``/v1/plivo`` (``<Stream bidirectional="true"
keepCallAlive="true">``, μ-law 8 kHz), with the call's own token in the
stream's ``extraHeaders`` (letters and digits only: ``calltoken=ISSUEDxHEX``),
which Plivo hands back in ``start.extra_headers``; ``phone_call`` redeems it
for the start's ``callId`` (the answer URL's ``CallUUID``). The upgrade is
let through but for a browser, or an unconfigured server reached from
elsewhere, and the ``start`` decides: Plivo's documentation does not say
the stream's upgrade is signed as its HTTP requests are.
https://docs.plivo.com/docs/voice/xml/audiostream
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
from .plivo_signature import NONCE_HEADER, SIGNATURE_HEADER, signature_matches
from .plivo_wire import PLIVO_PATH, TOKEN_HEADER
from .stream_urls import https_beside, one, stream_url_problem, webhook_query
from .twilio_call_token import CallTokens

ANSWER_PATH: Final = PLIVO_PATH + "/answer"
_CALL_ID = re.compile(r"[A-Za-z0-9-]{1,128}")
_PIPELINE = re.compile(r"[A-Za-z0-9]{1,64}")  # extraHeaders' alphabet


def stream_xml(url: str, pipeline: str | None = None, **headers: str) -> str:
    """The Plivo XML; ``ValueError`` (one line) for a URL or a value Plivo
    cannot carry (extraHeaders take letters and digits only)."""
    if problem := url_problem(url):
        raise ValueError(problem)
    values: Mapping[str, str] = {"pipeline": pipeline, **headers} if pipeline else headers
    for name, value in values.items():
        if not (_PIPELINE.fullmatch(name) and re.fullmatch(r"[A-Za-z0-9]{1,256}", value)):
            raise ValueError(f"Plivo's extraHeaders take letters and digits only: {name!r}")
    extra = ",".join(f"{name}={value}" for name, value in values.items())
    attributes = (
        'bidirectional="true" keepCallAlive="true" audioTrack="inbound" '
        'contentType="audio/x-mulaw;rate=8000"'
    )
    if extra:
        attributes += f' extraHeaders="{extra}"'
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Stream {attributes}>{escape(url)}</Stream></Response>\n"
    )


def url_problem(url: str) -> str | None:
    return stream_url_problem(url, query_note=": values travel as extraHeaders")


def answer_url(stream_url: str) -> str:
    """The public answer URL of a public stream URL (``wss://…/v1/plivo``)."""
    return https_beside(stream_url, "/answer")


def plivo_check(auth_token: str | None, url: str | None) -> None:
    """``ConfigError`` (one line) for a configuration that could check no call."""
    if auth_token == "":
        raise ConfigError("the Plivo auth token (PLIVO_AUTH_TOKEN) is empty")
    if url is not None and auth_token is None:
        raise ConfigError("--plivo-url without PLIVO_AUTH_TOKEN: no call could be checked")
    if url is not None and (problem := url_problem(url)):
        raise ConfigError(f"--plivo-url: {problem}")


def plivo_tokens(auth_token: str) -> CallTokens:
    return CallTokens(
        auth_token,
        answer="serve's answer XML (/v1/plivo/answer)",
        call_id="callId",
        alphanumeric=True,
    )


def answer_route(
    request: Request,
    stream_url: str,
    auth_token: str | None,
    tokens: CallTokens | None,
    now: float,
) -> Response | str:
    """The call's XML (200), or why not: a ``str`` is a refusal (403), a
    ``Response`` a request that is not a call (400). Without an
    ``auth_token`` (a local server) nothing is checked."""
    query = request.path.partition("?")[2]
    if auth_token is not None:
        try:
            signature = request.headers.get(SIGNATURE_HEADER)
            nonce = request.headers.get(NONCE_HEADER)
        except MultipleValuesError:
            return "a header is repeated"
        signed = answer_url(stream_url) + ("?" + query if query else "")
        if not signature_matches(auth_token, signed, nonce, signature):
            return f"no {SIGNATURE_HEADER} matches" if signature else f"no {SIGNATURE_HEADER}"
    fields = webhook_query(query)
    if fields is None:
        return response(400, "too many query parameters\n")
    call_id = one(fields, "CallUUID")
    if call_id is None or not _CALL_ID.fullmatch(call_id):
        return response(400, "no CallUUID: this is the answer URL Plivo requests for a call\n")
    pipeline = one(fields, "pipeline")
    if pipeline is not None and not _PIPELINE.fullmatch(pipeline):
        return response(400, "?pipeline= names a pipeline of letters and digits (on Plivo)\n")
    headers = {} if tokens is None else {TOKEN_HEADER: tokens.issue(call_id, now)}
    try:
        xml = stream_xml(stream_url, pipeline, **headers)
    except ValueError as exc:
        return response(400, f"{exc}\n")
    return response(200, xml, "text/xml; charset=utf-8")
