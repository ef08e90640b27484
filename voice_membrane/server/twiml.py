"""The TwiML that points a Twilio number at the server's ``/v1/twilio`` route.

``<Connect><Stream>`` makes the stream bidirectional (``<Start><Stream>`` would
only fork the call's audio to us). Custom parameters travel as ``<Parameter>``
nouns, not in the URL: Twilio refuses a ``<Stream>`` URL with a query string
(error 31920) and only connects over ``wss``.
https://www.twilio.com/docs/voice/twiml/stream
"""

from __future__ import annotations

from collections.abc import Mapping
from xml.sax.saxutils import escape

from .stream_urls import stream_url_problem

PIPELINE_PARAMETER = "pipeline"


def stream_twiml(url: str, pipeline: str | None = None, **parameters: str) -> str:
    """The TwiML document; ``ValueError`` (one line) for a URL Twilio cannot use."""
    problem = url_problem(url)
    if problem:
        raise ValueError(problem)
    params: Mapping[str, str] = (
        {PIPELINE_PARAMETER: pipeline, **parameters} if pipeline is not None else parameters
    )
    inner = "".join(
        f"<Parameter name={_attr(name)} value={_attr(value)}/>" for name, value in params.items()
    )
    stream = (
        f"<Stream url={_attr(url)}>{inner}</Stream>" if inner else f"<Stream url={_attr(url)}/>"
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Connect>{stream}</Connect></Response>\n"
    )


def url_problem(url: str) -> str | None:
    return stream_url_problem(
        url,
        tls_note=" (Twilio connects only over TLS)",
        query_note=" (Twilio refuses it): pass values with --pipeline instead",
    )


def _attr(value: str) -> str:
    return '"' + escape(value, {'"': "&quot;"}) + '"'
