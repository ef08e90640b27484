"""serve's ``GET /v1/twilio/status``: Twilio's status callbacks for a placed call,
taken only signed for the public URL (as Twilio signs a GET: the whole URL,
query included), each logged as one ``call_status`` line of known-shaped
values; anything else refused with its reason logged."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import pytest
from serve_helpers import pipelines

from voice_membrane.server import Server
from voice_membrane.testing.fake_twilio_progress import signature_of

pytestmark = pytest.mark.anyio

TOKEN = "twilio-auth-token-for-the-status-tests"
PUBLIC = "wss://voice.example.com/v1/twilio"
PUBLIC_STATUS = "https://voice.example.com/v1/twilio/status"
SESSION_TOKEN = "session-token-for-the-status-tests"
SID = "CA" + "5" * 32
CALLBACK = {
    "AccountSid": "AC" + "0" * 32,
    "ApiVersion": "2010-04-01",
    "CallSid": SID,
    "CallStatus": "completed",
    "CallDuration": "42",
    "Direction": "outbound-api",
    "From": "+15005550006",
    "To": "+14155550123",
    "SequenceNumber": "3",
    "CallbackSource": "call-progress-events",
}

Lines = list[tuple[str, dict[str, Any]]]


@asynccontextmanager
async def status_route(folder: Path, **options: Any) -> AsyncIterator[tuple[str, Lines]]:
    lines: Lines = []
    options.setdefault("twilio_auth_token", TOKEN)
    options.setdefault("twilio_url", PUBLIC)
    options.setdefault("token", SESSION_TOKEN)
    async with Server(
        pipelines(folder),
        port=0,
        preload=False,
        log=lambda event, **fields: lines.append((event, fields)),
        **options,
    ) as server:
        yield server.url + "/v1/twilio/status", lines


async def get(url: str, signature: str | None) -> tuple[int, bytes]:
    headers = {} if signature is None else {"X-Twilio-Signature": signature}

    def fetch() -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    return await anyio.to_thread.run_sync(fetch)


def logged(lines: Lines, event: str) -> list[dict[str, Any]]:
    return [fields for name, fields in lines if name == event]


async def test_a_signed_callback_is_one_call_status_line(tmp_path: Path) -> None:
    query = "?" + urlencode({**CALLBACK, "SipResponseCode": "200", "AnsweredBy": "human"})
    async with status_route(tmp_path) as (url, lines):
        status, body = await get(url + query, signature_of(TOKEN, PUBLIC_STATUS + query))
    assert (status, body) == (200, b"")
    assert logged(lines, "call_status") == [
        {
            "call_sid": SID,
            "call_status": "completed",
            "direction": "outbound-api",
            "duration_s": 42,
            "sip_response_code": 200,
            "answered_by": "human",
            "sequence": 3,
        }
    ]  # (never the numbers, the account or anything unknown)


async def test_what_has_no_known_shape_is_not_logged(tmp_path: Path) -> None:
    odd = {**CALLBACK, "Direction": "outbound api\n{x}", "CallDuration": "4 2"}
    query = "?" + urlencode(odd)
    async with status_route(tmp_path) as (url, lines):
        status, _ = await get(url + query, signature_of(TOKEN, PUBLIC_STATUS + query))
    assert status == 200
    [line] = logged(lines, "call_status")
    assert "direction" not in line and "duration_s" not in line


@pytest.mark.parametrize(
    ("signed_for", "token", "reason"),
    [
        (None, TOKEN, "no X-Twilio-Signature"),
        ("loopback", TOKEN, "X-Twilio-Signature does not match"),  # not the public URL
        (PUBLIC_STATUS, "another-accounts-auth-token", "X-Twilio-Signature does not match"),
        ("https://voice.example.com/v1/twilio/twiml", TOKEN, "X-Twilio-Signature does not match"),
    ],
)
async def test_an_unsigned_or_forged_callback_is_refused(
    tmp_path: Path, signed_for: str | None, token: str, reason: str
) -> None:
    query = "?" + urlencode(CALLBACK)
    async with status_route(tmp_path) as (url, lines):
        where = url if signed_for == "loopback" else signed_for
        signature = None if where is None else signature_of(token, where + query)
        status, _ = await get(url + query, signature)
    assert status == 403
    assert logged(lines, "call_status") == []
    [refused] = logged(lines, "http_refused")
    assert refused["path"] == "/v1/twilio/status" and refused["reason"] == reason
    assert TOKEN not in repr(lines)


@pytest.mark.parametrize(
    ("callback", "reason"),
    [
        ({k: v for k, v in CALLBACK.items() if k != "CallSid"}, "no CallSid"),
        ({**CALLBACK, "CallSid": "CA-1"}, "no CallSid"),
        ({**CALLBACK, "CallStatus": "exploded"}, "no known CallStatus"),
        ({f"p{i}": "x" for i in range(101)}, "too many query parameters"),
    ],
)
async def test_a_signed_request_that_is_no_callback_is_400(
    tmp_path: Path, callback: dict[str, str], reason: str
) -> None:
    query = "?" + urlencode(callback)
    async with status_route(tmp_path) as (url, lines):
        status, body = await get(url + query, signature_of(TOKEN, PUBLIC_STATUS + query))
    assert status == 400 and body.decode().startswith(reason)
    assert logged(lines, "call_status") == []
    assert logged(lines, "http_refused")[0]["reason"].startswith(reason)


async def test_without_an_auth_token_only_this_machine_may_call_it(tmp_path: Path) -> None:
    """A serve with no Twilio auth token (a local rehearsal) takes unsigned
    callbacks from loopback only, as its phone route does."""
    query = "?" + urlencode(CALLBACK)
    async with status_route(tmp_path, twilio_auth_token=None, twilio_url=None, token=None) as (
        url,
        lines,
    ):
        assert (await get(url + query, None))[0] == 200
        proxied = urllib.request.Request(url + query, headers={"X-Forwarded-For": "203.0.113.9"})

        def fetch() -> int:
            try:
                with urllib.request.urlopen(proxied) as answer:
                    return int(answer.status)
            except urllib.error.HTTPError as exc:
                return exc.code

        assert await anyio.to_thread.run_sync(fetch) == 403
    assert len(logged(lines, "call_status")) == 1
