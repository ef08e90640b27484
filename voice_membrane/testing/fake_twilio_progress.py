"""What the fake Twilio REST API does with a call it created, as Twilio does:
it dials (``initiated``, ``ringing``), and when the callee answers fetches the
call's TwiML from the call's ``Url`` (signed, with the call's parameters), the
call is ``in-progress`` until it is hung up (``talk_s``, or the API's
``Status=completed``), then ``completed``; a callee that is busy, does not
answer or cannot be reached ends it ``busy``, ``no-answer`` or ``failed``
with the SIP code Twilio reports. Each progress event the call asked for
(``StatusCallbackEvent``) is requested from its ``StatusCallback``, signed,
with the parameters Twilio sends
(https://www.twilio.com/docs/voice/api/call-resource#statuscallback).

Requests are signed as Twilio signs them, computed here on their own (not with
the server's code): HMAC-SHA1 of the URL, for a POST followed by its sorted
parameters, under the account's auth token — over ``sign_as(url)``: the
public URL Twilio would have called, where a proxy in front of the server
makes it differ from the loopback address the fake requests.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal
from urllib.parse import urlencode

import anyio

Outcome = Literal["answer", "busy", "no-answer", "failed"]
# The SIP response Twilio reports for a call that did not connect.
SIP_CODES: Final[Mapping[str, int]] = {"busy": 486, "no-answer": 487, "failed": 404}
ENDED: Final = frozenset({"completed", "busy", "failed", "no-answer", "canceled"})
API_VERSION: Final = "2010-04-01"
REQUEST_TIMEOUT_S: Final = 15.0


@dataclass(frozen=True, slots=True)
class Delivered:
    """One status callback as delivered: its event, ``CallStatus`` and the HTTP
    status the server answered (0: no answer at all)."""

    event: str
    call_status: str
    http_status: int


@dataclass
class FakeCall:
    sid: str
    account_sid: str
    to: str
    from_: str
    url: str
    method: str
    status_callback: str | None
    status_callback_method: str
    events: tuple[str, ...]
    status: str = "queued"
    created: float = field(default_factory=time.time)
    started: float | None = None
    ended: float | None = None
    duration_s: int | None = None
    twiml: tuple[int, str] | None = None  # what the voice webhook answered
    delivered: list[Delivered] = field(default_factory=list)
    hang_up: anyio.Event | None = None  # set by the API's Status=completed/canceled
    done: threading.Event = field(default_factory=threading.Event)  # progress over

    def end(self, status: str) -> None:
        """The call is over with ``status`` (its duration counted if it was answered)."""
        self.status = status
        self.ended = time.time()
        if self.started is not None:
            self.duration_s = round(self.ended - self.started)


@dataclass
class Progress:
    """How calls progress: the account's auth token (it signs), the fake's pace
    (``step_s`` between events), how long an answered call lasts unless hung up
    (``talk_s``), each callee's outcome (by number; default answered)."""

    auth_token: str
    step_s: float = 0.1
    talk_s: float = 1.0
    outcomes: Mapping[str, Outcome] = field(default_factory=dict)
    sign_as: Callable[[str], str] = lambda url: url

    async def run(self, call: FakeCall) -> None:
        try:
            await self._dial(call)
        finally:
            call.done.set()

    async def _dial(self, call: FakeCall) -> None:
        if await self._wait(call, self.step_s):
            return await self._end(call, "canceled")
        await self._report(call, "initiated", "initiated")
        if await self._wait(call, self.step_s):
            return await self._end(call, "canceled")
        call.status = "ringing"
        await self._report(call, "ringing", "ringing")
        if await self._wait(call, self.step_s):
            return await self._end(call, "canceled")
        outcome = self.outcomes.get(call.to, "answer")
        if outcome != "answer":
            return await self._end(call, outcome)
        call.status, call.started = "in-progress", time.time()
        call.twiml = await self._request(call, call.url, call.method, self._params(call))
        await self._report(call, "answered", "in-progress")
        if call.twiml[0] == 200:  # else Twilio says "an application error" and hangs up
            await self._wait(call, self.talk_s)
        await self._end(call, "completed")

    async def _end(self, call: FakeCall, status: str) -> None:
        if call.status not in ENDED:
            call.end(status)
        extra: dict[str, str] = {}
        if call.duration_s is not None:
            extra["CallDuration"] = str(call.duration_s)
        if call.status in SIP_CODES:
            extra["SipResponseCode"] = str(SIP_CODES[call.status])
        await self._report(call, "completed", call.status, extra)

    async def _wait(self, call: FakeCall, seconds: float) -> bool:
        """Wait ``seconds``; True if the call was hung up meanwhile (or before)."""
        assert call.hang_up is not None
        with anyio.move_on_after(seconds):
            await call.hang_up.wait()
        return call.hang_up.is_set()

    async def _report(
        self, call: FakeCall, event: str, status: str, extra: Mapping[str, str] | None = None
    ) -> None:
        if call.status_callback is None or event not in call.events:
            return
        params = {
            **self._params(call, status),
            "CallbackSource": "call-progress-events",
            "SequenceNumber": str(len(call.delivered)),
            "Timestamp": email.utils.formatdate(usegmt=True),
            **(extra or {}),
        }
        answered, _ = await self._request(
            call, call.status_callback, call.status_callback_method, params
        )
        call.delivered.append(Delivered(event, status, answered))

    def _params(self, call: FakeCall, status: str | None = None) -> dict[str, str]:
        """The parameters of every request Twilio makes about a call."""
        return {
            "AccountSid": call.account_sid,
            "ApiVersion": API_VERSION,
            "CallSid": call.sid,
            "CallStatus": status or call.status,
            "Called": call.to,
            "Caller": call.from_,
            "Direction": "outbound-api",
            "From": call.from_,
            "To": call.to,
        }

    async def _request(
        self, call: FakeCall, url: str, method: str, params: Mapping[str, str]
    ) -> tuple[int, str]:
        if method == "GET":
            url += ("&" if "?" in url else "?") + urlencode(params)
            body, signature = None, signature_of(self.auth_token, self.sign_as(url))
        else:
            body = urlencode(params).encode()
            signature = signature_of(self.auth_token, self.sign_as(url), params)
        return await anyio.to_thread.run_sync(_send, url, method, body, signature)


def signature_of(auth_token: str, url: str, params: Mapping[str, str] | None = None) -> str:
    """``X-Twilio-Signature``: base64 HMAC-SHA1 of the URL and, for a POST, each
    parameter's name and value in name order."""
    given = params or {}
    data = url + "".join(name + given[name] for name in sorted(given))
    digest = hmac.new(auth_token.encode(), data.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def _send(url: str, method: str, body: bytes | None, signature: str) -> tuple[int, str]:
    headers = {"X-Twilio-Signature": signature, "User-Agent": "TwilioProxy/1.1"}
    if body is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    try:
        with opener.open(request, timeout=REQUEST_TIMEOUT_S) as answer:
            return answer.status, answer.read(1 << 16).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(1 << 16).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError):
        return 0, ""
