"""What a fake Twilio does before a call's stream: the voice webhook's TwiML
fetched as Twilio fetches it (a signed GET with the call's parameters in the
query), and Twilio's signature, computed here on its own, not with the
server's code, so the two check each other."""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.error
import urllib.request
from urllib.parse import urlencode
from xml.etree import ElementTree

import anyio


class CallRefused(Exception):
    """The server refused the WebSocket upgrade (``status``: its HTTP status)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the server refused the call with HTTP {status}")
        self.status = status


def twiml_url_for(stream_url: str) -> str:
    """The voice webhook of a stream URL, as ``serve`` answers it: ``https://`` for
    ``wss://`` (``http://`` for ``ws://``), the stream's path + ``/twiml``."""
    scheme, rest = stream_url.split("://", 1)
    return {"wss": "https", "ws": "http"}.get(scheme, scheme) + "://" + rest + "/twiml"


async def fetch_stream_parameters(
    url: str,
    auth_token: str,
    call_sid: str,
    account_sid: str,
    *,
    signed_url: str | None = None,
) -> dict[str, str]:
    """What Twilio does when a call comes in to a number whose voice webhook
    (HTTP GET) is ``twiml_url_for(url)``: fetch it, signed over the public
    webhook (``twiml_url_for(signed_url)``) with the call's parameters in the
    query; the ``<Stream>``'s ``<Parameter>`` values. ``CallRefused`` if refused."""
    query = "?" + urlencode(
        {
            "AccountSid": account_sid,
            "ApiVersion": "2010-04-01",
            "CallSid": call_sid,
            "CallStatus": "ringing",
            "Direction": "inbound",
            "From": "+15005550006",
            "To": "+15005550001",
        }
    )
    webhook = twiml_url_for(url) + query
    signature = twilio_signature(auth_token, twiml_url_for(signed_url or url) + query)
    headers = {"X-Twilio-Signature": signature}
    status, body = await anyio.to_thread.run_sync(webhook_get, webhook, headers)
    if status != 200:
        raise CallRefused(status)
    stream = ElementTree.fromstring(body).find("./Connect/Stream")
    if stream is None:
        raise ValueError("the voice webhook's TwiML has no <Connect><Stream>")
    return {p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter")}


def webhook_get(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """A carrier's GET of a webhook of ours: its status and (the first 64 KB of) its body."""
    request = urllib.request.Request(url, headers=headers)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    try:
        with opener.open(request, timeout=30) as answer:
            return answer.status, answer.read(1 << 16)
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def twilio_signature(auth_token: str, url: str) -> str:
    """Twilio's signature of a GET to ``url`` (computed here on its own, not with
    the server's code, so the two check each other)."""
    digest = hmac.new(auth_token.encode(), url.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")
