"""Who may open ``/v1/twilio``: decided on the upgrade request, before any work.

With a Twilio auth token configured, only a request whose ``X-Twilio-Signature``
matches the public URL Twilio called (``twilio_signature.signed_url``). Without
one, only a local caller (tests, the fake caller) of a server nobody else
reaches (``trust.py``: no public name, no proxy's marks on the request): an
open phone route would let anyone spend the pipeline's engines.
A browser (an ``Origin`` header: Twilio sends none) is refused either way.
"""

from __future__ import annotations

from websockets.datastructures import MultipleValuesError
from websockets.http11 import Request

from .twilio_signature import SIGNATURE_HEADER, signature_matches, signed_url


def twilio_refusal(
    request: Request,
    *,
    auth_token: str | None,
    public_url: str | None,
    local: bool,
) -> str | None:
    """Why the upgrade is refused (HTTP 403, one line), or None to let it go on.
    ``local``: the caller is on this machine and the server is reached from
    nowhere else (``trust.is_local``, on a server with no public name)."""
    try:
        origin = request.headers.get("Origin")
        signature = request.headers.get(SIGNATURE_HEADER)
        host = request.headers.get("Host")
    except MultipleValuesError:
        return "a header is repeated"
    if origin is not None:
        return "the phone route is not for browsers"
    if auth_token is None:
        return None if local else "no Twilio auth token is configured: phone calls are refused"
    if signature is None:
        return "no X-Twilio-Signature"
    if not signature_matches(auth_token, signed_url(public_url, request.path, host), signature):
        return "X-Twilio-Signature does not match"
    return None
