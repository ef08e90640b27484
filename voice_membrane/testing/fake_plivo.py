"""A fake Plivo caller: ``fake_phone.FakePhoneCall`` in Plivo's dialect.

As Plivo does for a number whose answer URL is ``serve``'s, with an auth
token it first requests the answer URL (``…/v1/plivo/answer``, a GET with
the call's ``CallUUID``, signed ``X-Plivo-Signature-V3`` with a fresh nonce,
computed here on its own, not with the server's code) and sends the
``<Stream>``'s ``extraHeaders`` back in ``start.extra_headers``; then it
opens the stream and speaks Plivo's Audio Streams: no stop, the socket just
closes on a hang-up; a ``clearAudio`` drops the pending checkpoints and is
acknowledged with ``clearedAudio``
(https://www.plivo.com/docs/voice-agents/audio-streaming/concepts/audio-streaming-reference).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlencode
from xml.etree import ElementTree

import anyio

from .echo_room import PlayedEcho
from .fake_carrier_dialects import PlivoDialect
from .fake_phone import FakePhoneCall, call_number, phone_call
from .fake_twilio_webhook import CallRefused, webhook_get

MULAW_8K = dict(PlivoDialect.MULAW_8K)


def answer_url_for(stream_url: str) -> str:
    scheme, rest = stream_url.split("://", 1)
    return {"wss": "https", "ws": "http"}.get(scheme, scheme) + "://" + rest + "/answer"


def plivo_signature(auth_token: str, url: str, query: Mapping[str, str], nonce: str) -> str:
    """Plivo's V3 signature of a GET to ``url`` with ``query``: the URL with the
    query sorted by name, ``.``, the nonce; HMAC-SHA256 with the auth token."""
    sorted_query = "&".join(f"{name}={query[name]}" for name in sorted(query))
    message = f"{url}?{sorted_query}.{nonce}" if sorted_query else f"{url}.{nonce}"
    digest = hmac.new(auth_token.encode(), message.encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


async def fetch_extra_headers(
    url: str, auth_token: str, call_id: str, *, signed_url: str | None = None
) -> dict[str, str]:
    """The ``<Stream>``'s ``extraHeaders`` from the answer URL of stream ``url``,
    signed for ``signed_url``'s (default ``url``'s); ``CallRefused`` if refused."""
    query = {
        "CallUUID": call_id,
        "Direction": "inbound",
        "From": "14155550100",
        "To": "14155550199",
        "CallStatus": "ringing",
    }
    nonce = str(int.from_bytes(os.urandom(8)))
    signature = plivo_signature(auth_token, answer_url_for(signed_url or url), query, nonce)
    headers = {"X-Plivo-Signature-V3": signature, "X-Plivo-Signature-V3-Nonce": nonce}
    target = answer_url_for(url) + "?" + urlencode(query)
    status, body = await anyio.to_thread.run_sync(webhook_get, target, headers)
    if status != 200:
        raise CallRefused(status)
    stream = ElementTree.fromstring(body).find("./Stream")
    if stream is None:
        raise ValueError("the answer XML has no <Stream>")
    pairs = (pair.split("=", 1) for pair in stream.get("extraHeaders", "").split(",") if pair)
    return {name: value for name, value in pairs}


@asynccontextmanager
async def plivo_call(
    url: str,
    *,
    auth_token: str | None = None,
    signed_url: str | None = None,
    parameters: Mapping[str, str] | None = None,
    media_format: Mapping[str, Any] = MULAW_8K,
    speed: float = 1.0,
    send_start: bool = True,
    echo_marks: bool = True,
    echo: PlayedEcho | None = None,
) -> AsyncIterator[FakePhoneCall]:
    """A call to ``url``: with an ``auth_token``, the answer URL first (its
    extraHeaders in ``start``, ``parameters`` added over them). ``CallRefused``
    if the answer URL or the upgrade is refused. On leaving, the call closes."""
    n = call_number(url)
    call_id = str(uuid.UUID(int=n % (1 << 128)))
    extra: dict[str, str] = {}
    if auth_token is not None:
        extra = await fetch_extra_headers(url, auth_token, call_id, signed_url=signed_url)
    extra.update(parameters or {})
    async with phone_call(
        url,
        PlivoDialect(),
        parameters=extra,
        media_format=media_format,
        ids=(str(uuid.UUID(int=(n * 7) % (1 << 128))), call_id, "MA" + "X" * 18),
        speed=speed,
        send_start=send_start,
        echo_marks=echo_marks,
        echo=echo,
    ) as call:
        yield call
