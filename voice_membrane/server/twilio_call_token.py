"""A per-call secret, so that a captured ``X-Twilio-Signature`` opens no call.

Twilio signs the stream's WebSocket upgrade over its URL alone (a GET with no
parameters), so that signature is the same for every call: whoever reads it
once (a proxy's header log, a debugging dump) could open calls with it for as
long as the auth token lives. So the TwiML ``serve`` answers a call with
(``twiml_route``) carries a ``<Parameter>`` minted for that call, which
Twilio hands back in the stream's ``start`` (``customParameters``):
``ISSUED.MAC``, the HMAC-SHA256 of the call's ``CallSid`` and the issue time
under a key derived from the auth token (every worker and replica with the
token checks it, none stores it). A ``start`` is taken only with a token made
for its own ``callSid``, issued within ``TTL_S`` (Twilio opens the stream as
soon as it has the TwiML), and for a ``callSid`` this process has not taken
before (``REMEMBER_S``): one stream per call, once.

Sans-I/O: the caller passes the wall-clock time (tokens cross processes).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Final

CALL_TOKEN_PARAMETER: Final = "call_token"
TTL_S: Final = 60.0  # from the TwiML to the stream's start: Twilio connects at once
SKEW_S: Final = 30.0  # a token issued "later" than now: another replica's clock
# A used callSid is refused again for this long: Twilio's webhook request has no
# date of its own, so a replayed one gets a fresh token for its old callSid.
REMEMBER_S: Final = 24 * 3600.0
MAX_REMEMBERED: Final = 100_000  # calls; past it the oldest are forgotten first
_CONTEXT: Final = b"voice-membrane call token v1"


class CallTokens:
    """``secret``: the carrier's (Twilio's or Plivo's auth token; for Telnyx, a
    key derived from the sessions' token); ``answer``: who gives each call its
    token, and ``call_id`` the start's name for the call's id, both for the
    refusals' one line; ``alphanumeric``: tokens of letters and digits only
    (``ISSUEDxHEXMAC``), for a carrier whose parameters take no other (Plivo's
    extraHeaders)."""

    def __init__(
        self,
        secret: str,
        *,
        answer: str = "serve's TwiML (/v1/twilio/twiml)",
        call_id: str = "callSid",
        alphanumeric: bool = False,
    ) -> None:
        self._key = hmac.new(secret.encode(), _CONTEXT, hashlib.sha256).digest()
        self._answer, self._call_id = answer, call_id
        self._separator = "x" if alphanumeric else "."
        self._alphanumeric = alphanumeric
        self._used: dict[str, float] = {}  # callSid → when it was taken, oldest first

    def issue(self, call_sid: str, now: float) -> str:
        issued = int(now)
        return f"{issued}{self._separator}{self._mac(call_sid, issued)}"

    def redeem(self, call_sid: str | None, token: str | None, now: float) -> str | None:
        """None when ``token`` lets call ``call_sid`` start (it never will again),
        else why not, in one line (no secret in it)."""
        if not call_sid:
            return f"start has no {self._call_id}"
        if not token:
            return f"no call token in start: {self._answer} gives each call one"
        issued_text, _, mac = token.partition(self._separator)
        if not issued_text.isdigit() or len(issued_text) > 12:
            return "a malformed call token"
        issued = int(issued_text)
        if not hmac.compare_digest(mac.encode(), self._mac(call_sid, issued).encode()):
            return "the call token is not this call's"
        if now - issued > TTL_S or issued - now > SKEW_S:
            return "the call token has expired"
        self._forget(now)
        if call_sid in self._used:
            return "this call has been taken already"
        self._used[call_sid] = now
        if len(self._used) > MAX_REMEMBERED:
            del self._used[next(iter(self._used))]
        return None

    def _mac(self, call_sid: str, issued: int) -> str:
        digest = hmac.new(self._key, f"{call_sid}.{issued}".encode(), hashlib.sha256).digest()
        if self._alphanumeric:
            return digest.hex()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def _forget(self, now: float) -> None:
        while self._used:
            sid, taken = next(iter(self._used.items()))
            if now - taken <= REMEMBER_S:
                return
            del self._used[sid]
