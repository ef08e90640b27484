"""A fake Telnyx caller: ``fake_phone.FakePhoneCall`` in Telnyx's dialect.

As Telnyx does for a TeXML number, with a signing key it first requests the
voice webhook (``…/v1/telnyx/texml``, a GET with the call's ``CallSid`` and
Telnyx's Ed25519 signature of ``timestamp|body``, computed here with the
key's private half, as Telnyx holds it) and sends the ``<Stream>``'s
``<Parameter>``s in ``start``'s ``custom_parameters``; then it opens the
stream (the upgrade is not signed) and speaks Telnyx's media streaming
(https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket).

::

    key = Ed25519PrivateKey.generate()        # serve gets public_key_of(key)
    async with telnyx_call(url, signing_key=key, parameters={"pipeline": "x"}) as call:
        ...
"""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlencode
from xml.etree import ElementTree

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from .echo_room import PlayedEcho
from .fake_carrier_dialects import TelnyxDialect
from .fake_phone import FakePhoneCall, call_number, phone_call
from .fake_twilio_webhook import CallRefused, webhook_get

PCMU_8K = dict(TelnyxDialect.PCMU_8K)


def public_key_of(key: Ed25519PrivateKey) -> str:
    """The base64 public key Mission Control shows for ``key`` (``TELNYX_PUBLIC_KEY``)."""
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def telnyx_headers(
    key: Ed25519PrivateKey, body: bytes = b"", at: float | None = None
) -> dict[str, str]:
    """Telnyx's signature headers for a request with ``body``, sent at ``at``."""
    timestamp = str(int(time.time() if at is None else at))
    signature = key.sign(timestamp.encode() + b"|" + body)
    return {
        "telnyx-timestamp": timestamp,
        "telnyx-signature-ed25519": base64.b64encode(signature).decode("ascii"),
    }


def texml_url_for(stream_url: str) -> str:
    scheme, rest = stream_url.split("://", 1)
    return {"wss": "https", "ws": "http"}.get(scheme, scheme) + "://" + rest + "/texml"


async def fetch_texml_parameters(
    url: str, call_id: str, headers: Mapping[str, str]
) -> dict[str, str]:
    """The ``<Stream>``'s ``<Parameter>``s of the TeXML the voice webhook of
    stream ``url`` answers for call ``call_id``; ``CallRefused`` if refused."""
    query = "?" + urlencode(
        {
            "CallSid": call_id,
            "AccountSid": "19a75cea-02c6-4b9a-84fa-c9bc8341feb8",
            "From": "+13122010094",
            "To": "+13122123456",
            "CallStatus": "ringing",
            "Direction": "inbound",
        }
    )
    status, body = await anyio.to_thread.run_sync(
        webhook_get, texml_url_for(url) + query, dict(headers)
    )
    if status != 200:
        raise CallRefused(status)
    stream = ElementTree.fromstring(body).find("./Start/Stream")
    if stream is None:
        raise ValueError("the TeXML has no <Start><Stream>")
    return {p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter")}


@asynccontextmanager
async def telnyx_call(
    url: str,
    *,
    signing_key: Ed25519PrivateKey | None = None,
    parameters: Mapping[str, str] | None = None,
    media_format: Mapping[str, Any] = PCMU_8K,
    speed: float = 1.0,
    send_start: bool = True,
    echo_marks: bool = True,
    echo: PlayedEcho | None = None,
) -> AsyncIterator[FakePhoneCall]:
    """A call to ``url``: with a ``signing_key``, the TeXML webhook first (its
    parameters in ``start``, ``parameters`` added over them). ``media_format``:
    what ``start`` declares. ``CallRefused`` if the webhook or the upgrade is
    refused. On leaving, the call hangs up (``stop`` and close)."""
    n = call_number(url)
    call_id = f"v3:{n:032x}"  # (TeXML's CallSid: the call's call_control_id)
    custom: dict[str, str] = {}
    if signing_key is not None:
        custom = await fetch_texml_parameters(url, call_id, telnyx_headers(signing_key))
    custom.update(parameters or {})
    async with phone_call(
        url,
        TelnyxDialect(),
        parameters=custom,
        media_format=media_format,
        ids=(f"{n:032x}", call_id, "3e6f995f-85f7-4705-9741-53b116d28237"),
        speed=speed,
        send_start=send_start,
        echo_marks=echo_marks,
        echo=echo,
    ) as call:
        yield call
