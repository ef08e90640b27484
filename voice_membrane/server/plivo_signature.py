"""``X-Plivo-Signature-V3``: proof that a request comes from Plivo.

Plivo signs each request to an application's URLs with the account's auth
token: base64 of the HMAC-SHA256 of the URL it requested — for a GET, with
its query parameters sorted by name (``name=value`` joined by ``&``, values
as decoded) — then ``.`` and the request's ``X-Plivo-Signature-V3-Nonce``.
The header may hold several signatures, comma-separated; one must match.
(https://docs.plivo.com/docs/voice/xml/request/validation; as Plivo's own
``plivo.utils.validate_v3_signature`` computes it, plivo-python's
``plivo/utils/signature_v3.py``.)

The URL is the public one Plivo called, which a proxy may change: the server
takes it from configuration (``--plivo-url``) when told.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Final
from urllib.parse import parse_qs, urlsplit, urlunsplit

SIGNATURE_HEADER: Final = "X-Plivo-Signature-V3"
NONCE_HEADER: Final = "X-Plivo-Signature-V3-Nonce"


def signed_url(url: str) -> str:
    """``url`` as Plivo signs a GET to it: its query sorted by name."""
    parts = urlsplit(url)
    query = parse_qs(parts.query, keep_blank_values=True, max_num_fields=100)
    pairs = [f"{name}={value}" for name in sorted(query) for value in sorted(query[name])]
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return base + ("?" + "&".join(pairs) if pairs else "")


def compute_signature(auth_token: str, url: str, nonce: str) -> str:
    message = f"{signed_url(url)}.{nonce}".encode()
    digest = hmac.new(auth_token.encode(), message, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def signature_matches(auth_token: str, url: str, nonce: str | None, header: str | None) -> bool:
    """Whether one of the signatures in ``header`` is Plivo's for ``url`` and
    ``nonce`` (constant time; a missing one never matches)."""
    if not header or not nonce or not auth_token:
        return False
    try:
        expected = compute_signature(auth_token, url, nonce).encode()
    except ValueError:  # a query past parse_qs's limits
        return False
    matched = False
    for given in header.split(",")[:8]:
        matched |= hmac.compare_digest(expected, given.strip().encode())
    return matched
