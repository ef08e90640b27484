"""The public URLs of a phone route, sans-I/O: the ``wss://`` stream URL a
carrier connects to, checked, the https URLs of its webhooks beside it (the
voice webhook, Twilio's status callbacks, Plivo's answer URL), which the
carriers sign and the server checks against, and their query strings read."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

Query = dict[str, list[str]]


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


def webhook_query(text: str) -> Query | None:
    """A webhook's query string, read (None: over 100 fields, a flood)."""
    try:
        return parse_qs(text, max_num_fields=100)
    except ValueError:
        return None


def one(query: Query, name: str) -> str | None:
    """``name``'s value when the query gives it once (twice or more: none)."""
    values = query.get(name)
    return values[0] if values and len(values) == 1 else None
