"""Who is trusted without a secret: a local client of a server nobody else reaches.

Without a token ``serve`` takes sessions from whoever connects, and without a
Twilio auth token it takes unsigned calls: safe on loopback only, where
"whoever" is this machine's users. A reverse proxy or tunnel on the same
machine breaks that: it forwards every internet client from 127.0.0.1. So
loopback means trusted only when nothing says the server is reached from
elsewhere:

- at start-up, a public name (an ``--allow-host`` or ``--twilio-url`` host that
  is not loopback) exposes the server: it needs a token (``Server`` refuses to
  start without one) and takes phone calls signed only;
- per request, a proxy's marks (``Forwarded``, ``Via``, ``X-Forwarded-*``,
  ``X-Real-IP``, ``CF-Connecting-IP``, a ``Host`` that is not a loopback name)
  make the request not local, whatever its peer address.

A proxy that adds no header and rewrites the ``Host`` to 127.0.0.1 cannot be
told from a local client: docs/serve.md says so (give such a server a token).
Sans-I/O: strings in, verdicts out.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from websockets.datastructures import Headers, MultipleValuesError

from .hosts import canonical_ip, is_loopback_host, parse_authority

# Reached from elsewhere a token is all that stands between the port and anyone:
# one this short could be guessed.
MIN_TOKEN_LENGTH = 16
# What a proxy adds to say whom it forwards (RFC 7239 and RFC 9110's Via, the de
# facto X- ones, and Cloudflare's, whose tunnel runs on the server's machine).
PROXY_HEADERS = (
    "Forwarded",
    "Via",
    "X-Forwarded-For",
    "X-Forwarded-Host",
    "X-Forwarded-Proto",
    "X-Real-IP",
    "CF-Connecting-IP",
)


def public_name(allow_hosts: Iterable[str], *carrier_urls: str | None) -> str | None:
    """The first name the server is configured to answer to that is not loopback
    (an ``--allow-host``, a ``--twilio-url``, ``--telnyx-url`` or ``--plivo-url`` host), or None.
    A name that does not parse counts as public: failing closed costs a token,
    not a hole."""
    names = list(allow_hosts)
    for url in carrier_urls:
        if url is not None:
            names.append(urlsplit(url).netloc.rpartition("@")[2])
    for name in names:
        authority = parse_authority(name)
        if authority is None or not is_loopback_host(authority.host):
            return name
    return None


def secrets_problem(
    public: str | None,
    token: str | None,
    twilio_auth_token: str | None,
    twilio_url: str | None,
) -> str | None:
    """Why a server reached as ``public`` (its address or a public name; None:
    loopback only) cannot start with these secrets (one line), or None."""
    # An empty secret is a mistake (a variable set to nothing), never "unset".
    if token == "":
        return "the token is empty (--token or VOICE_MEMBRANE_TOKEN)"
    if twilio_auth_token == "":
        return "the Twilio auth token (TWILIO_AUTH_TOKEN) is empty"
    if public is not None and token is None:
        return (
            f"refusing to serve {public[:100]} without a token (--token or "
            "VOICE_MEMBRANE_TOKEN): anyone who can reach it could use it, and a proxy "
            "on this machine brings every client from 127.0.0.1 (docs/serve.md)"
        )
    if public is not None and token is not None and len(token) < MIN_TOKEN_LENGTH:
        return (
            f"refusing a token of {len(token)} characters on {public[:100]}: use at least "
            f"{MIN_TOKEN_LENGTH} (python -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    if twilio_url is not None and twilio_auth_token is None:
        return (
            "--twilio-url without TWILIO_AUTH_TOKEN: no call could be checked, so none "
            "would be taken (docs/telephony.md)"
        )
    return None


def proxy_mark(headers: Headers) -> str | None:
    """The first sign that a request came through a proxy (a header's name, or
    ``Host``), or None."""
    for name in PROXY_HEADERS:
        if name in headers:
            return name
    try:
        host = headers.get("Host")
    except MultipleValuesError:
        return "Host"
    authority = None if host is None else parse_authority(host)
    if authority is None or not is_loopback_host(authority.host):
        return "Host"
    return None


def is_local(headers: Headers, peer_ip: str | None) -> bool:
    """The request came from this machine, not through a proxy: a loopback peer
    and no proxy's mark."""
    if peer_ip is None:
        return False
    try:
        peer = canonical_ip(peer_ip)
    except ValueError:
        return False
    return is_loopback_host(peer) and proxy_mark(headers) is None
