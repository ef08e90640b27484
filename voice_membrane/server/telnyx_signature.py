"""``telnyx-signature-ed25519``: proof that a webhook request comes from Telnyx.

Telnyx signs each webhook with its Ed25519 key: the signature (base64) of
``{telnyx-timestamp}|{the raw body}``, checked with the account's public key
(Mission Control → Keys & Credentials → Public Key, base64), as Telnyx's own
SDKs do (``telnyx.webhooks``: https://developers.telnyx.com/docs/messaging/messages/receiving-webhooks).
Its media WebSocket's upgrade is not signed: what opens a call is the per-call
token ``serve``'s TeXML gives it (``twilio_call_token.CallTokens``).

A GET (the TeXML voice webhook ``serve`` answers) has no body, so its
signature covers the timestamp alone, not the query: one signature could be
replayed with another call's id. So a signature is taken once (per process,
for as long as its timestamp is within ``TOLERANCE_S``), and a timestamp
further than that from now is refused.

Sans-I/O: the caller passes the wall-clock time.
"""

from __future__ import annotations

import base64
import binascii
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

SIGNATURE_HEADER: Final = "telnyx-signature-ed25519"
TIMESTAMP_HEADER: Final = "telnyx-timestamp"
TOLERANCE_S: Final = 300.0  # Telnyx's SDKs' own default
MAX_REMEMBERED: Final = 100_000


class TelnyxSignatures:
    def __init__(self, public_key: str) -> None:
        """``ValueError`` (one line, no key in it) for a key that is not a
        base64 Ed25519 public key."""
        try:
            raw = base64.b64decode(public_key.strip(), validate=True)
            self._key = Ed25519PublicKey.from_public_bytes(raw)
        except (binascii.Error, ValueError):
            raise ValueError(
                "TELNYX_PUBLIC_KEY is not a base64 Ed25519 public key (32 bytes): copy it "
                "from Mission Control, Keys & Credentials"
            ) from None
        self._seen: dict[bytes, float] = {}  # signature → its timestamp, oldest first

    def refusal(
        self, signature: str | None, timestamp: str | None, body: bytes, now: float
    ) -> str | None:
        """Why the request is not Telnyx's (one line), or None: it is, and this
        signature will not be taken again."""
        if not signature or not timestamp:
            return f"no {SIGNATURE_HEADER} or {TIMESTAMP_HEADER}"
        if not timestamp.isdigit() or len(timestamp) > 12:
            return f"{TIMESTAMP_HEADER} is not a time"
        if abs(now - int(timestamp)) > TOLERANCE_S:
            return f"{TIMESTAMP_HEADER} is more than {TOLERANCE_S:.0f} s from now"
        try:
            signed = base64.b64decode(signature.strip(), validate=True)
            self._key.verify(signed, timestamp.encode() + b"|" + body)
        except (binascii.Error, ValueError, InvalidSignature):
            return f"{SIGNATURE_HEADER} does not match"
        self._forget(now)
        if signed in self._seen:
            return f"this {SIGNATURE_HEADER} was taken already"
        self._seen[signed] = float(timestamp)
        if len(self._seen) > MAX_REMEMBERED:
            del self._seen[next(iter(self._seen))]
        return None

    def _forget(self, now: float) -> None:
        while self._seen:
            signature, at = next(iter(self._seen.items()))
            if now - at <= TOLERANCE_S:
                return
            del self._seen[signature]
