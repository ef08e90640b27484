"""``X-Twilio-Signature``: proof that a request comes from Twilio.

Twilio signs each request with the account's auth token: base64 of the
HMAC-SHA1 of the full URL it requested followed by the POST parameters sorted
by name, each name then its value (none for the WebSocket upgrade of a Media
Stream, a GET). https://www.twilio.com/docs/usage/webhooks/webhooks-security

The URL is the public one Twilio called (``wss://voice.example.com/v1/twilio``),
which a proxy or tunnel in front of the server may change (scheme, host, port,
path prefix): the server takes it from configuration when told
(``signed_url``). As Twilio's own validators do, a URL is accepted signed with
or without its port (Twilio's signing is not consistent about an explicit
default port).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

SIGNATURE_HEADER = "X-Twilio-Signature"
_DEFAULT_PORTS = {"https": 443, "wss": 443, "http": 80, "ws": 80}

Params = Mapping[str, str | Iterable[str]]


def compute_signature(auth_token: str, url: str, params: Params | None = None) -> str:
    """The signature Twilio sends for a request to ``url`` with ``params``."""
    data = url
    for name in sorted(params or {}):
        value = (params or {})[name]
        values = [value] if isinstance(value, str) else sorted(value)
        data += "".join(name + v for v in values)
    digest = hmac.new(auth_token.encode(), data.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def signature_matches(
    auth_token: str, url: str, signature: str | None, params: Params | None = None
) -> bool:
    """Whether ``signature`` is Twilio's for ``url`` (with or without its port),
    compared in constant time. A missing or empty signature never matches."""
    if not signature or not auth_token:
        return False
    given = signature.strip().encode()
    matched = False
    for candidate in url_variants(url):
        expected = compute_signature(auth_token, candidate, params).encode()
        # Every variant is checked, so the time taken does not say which matched.
        matched |= hmac.compare_digest(expected, given)
    return matched


def url_variants(url: str) -> list[str]:
    """``url`` as given, without its port, and with its scheme's default port."""
    parts = urlsplit(url)
    variants = [url]
    host = parts.hostname
    if host is None:
        return variants
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    userinfo = parts.netloc.rpartition("@")[0]
    prefix = f"{userinfo}@" if userinfo else ""
    try:
        port = parts.port
    except ValueError:  # not a number: only the URL as given
        return variants
    default = _DEFAULT_PORTS.get(parts.scheme.lower())
    without = urlunsplit(parts._replace(netloc=prefix + host))
    variants.append(without)
    if port is None and default is not None:
        variants.append(urlunsplit(parts._replace(netloc=f"{prefix}{host}:{default}")))
    return list(dict.fromkeys(variants))


def signed_url(public_url: str | None, request_path: str, host: str | None) -> str:
    """The URL Twilio signed for an upgrade to ``request_path`` (path and query as
    the server received them): the configured ``public_url`` (the one in the
    TwiML, ``wss://voice.example.com/v1/twilio``) with the request's query, or,
    without one, ``wss://`` + the Host header + the request's path (Twilio only
    connects over wss)."""
    query = request_path.partition("?")[2]
    if public_url is None:
        return f"wss://{host or ''}{request_path}"
    base = public_url
    if query and "?" not in base:
        base += "?" + query
    return base
