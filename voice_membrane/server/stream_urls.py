"""The public URLs of a phone route, sans-I/O: the ``wss://`` stream URL a
carrier connects to, checked, and the https URLs of its webhooks beside it
(the voice webhook, Twilio's status callbacks, Plivo's answer URL), which
the carriers sign and the server checks against."""

from __future__ import annotations

from urllib.parse import urlsplit


def stream_url_problem(url: str, *, tls_note: str = "", query_note: str = "") -> str | None:
    """Why ``url`` cannot be a carrier's stream URL, or None. ``tls_note`` and
    ``query_note`` say the carrier's own reason after the rule they follow."""
    parts = urlsplit(url)
    if parts.scheme != "wss":
        return f"the stream URL must start with wss://{tls_note}: {url!r}"
    if not parts.hostname:
        return f"the stream URL has no host: {url!r}"
    if parts.query or parts.fragment:
        return f"the stream URL cannot have a query string{query_note}"
    return None


def https_beside(stream_url: str, suffix: str) -> str:
    """The public https URL at ``suffix`` under a stream URL (``wss://…/v1/twilio``
    and ``/twiml``: ``https://…/v1/twilio/twiml``); ``ws://`` gives ``http://``."""
    scheme, rest = stream_url.split("://", 1)
    return {"wss": "https", "ws": "http"}.get(scheme, scheme) + "://" + rest + suffix
