"""Twilio's REST API through the official ``twilio`` SDK, for ``voice-membrane call``.

The SDK makes every request (auth, form encoding, its errors); only where the
requests go may change: ``$TWILIO_BASE_URL`` (ours) sends them to another
origin, a fake on loopback in tests, through the SDK's documented custom
``http_client`` (the SDK has no base URL setting; its edge and region
settings only pick among ``*.twilio.com`` hosts). Its errors become one line
each (``failure_line``) with Twilio's own code and message, never a traceback,
a request URL (it holds the Account SID) or a credential.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from ..infra.redact import redact
from .outbound_plan import STATUS_EVENTS, Credentials, OutboundCall

API_TIMEOUT_S: Final = 15.0  # each request; an unreachable API is one line after this
MESSAGE_LIMIT: Final = 300  # characters of Twilio's message shown
_SPACES = re.compile(r"\s+")
# What a few of Twilio's codes mean for this command, after Twilio's own message.
_HINTS: Final = {
    20003: "check TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN (or the API key and secret)",
    21210: "--from must be one of the account's Twilio numbers or a verified caller ID",
    21211: "the number to call is not one Twilio can dial",
    21214: "the number to call cannot be reached",
}


@dataclass(frozen=True, slots=True)
class CallState:
    sid: str
    status: str
    duration_s: str | None = None


def twilio_client(credentials: Credentials, base_url: str | None) -> Any:
    """A ``twilio.rest.Client`` for the credentials, its requests sent to
    ``base_url`` when given (else Twilio's own hosts)."""
    from twilio.http.http_client import TwilioHttpClient  # type: ignore[import-untyped]
    from twilio.rest import Client  # type: ignore[import-untyped]

    class _OriginClient(TwilioHttpClient):  # type: ignore[misc]
        """The SDK's HTTP client, each request sent to ``base_url`` instead."""

        def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            return super().request(method, _moved(url, base_url), *args, **kwargs)

    http_client = (TwilioHttpClient if base_url is None else _OriginClient)(timeout=API_TIMEOUT_S)
    return Client(
        credentials.username,
        credentials.password,
        account_sid=credentials.account_sid,
        http_client=http_client,
    )


def place_call(client: Any, call: OutboundCall) -> CallState:
    """``calls.create``: Twilio fetches the call's TwiML from serve's voice webhook
    (GET: serve's HTTP side answers GET only) once the callee answers, and
    reports each progress event to serve's status route (GET, for the same reason)."""
    created = client.calls.create(
        to=call.to,
        from_=call.from_,
        url=call.twiml_url,
        method="GET",
        status_callback=call.status_url,
        status_callback_event=list(STATUS_EVENTS),
        status_callback_method="GET",
    )
    return _state(created)


def fetch_call(client: Any, sid: str) -> CallState:
    return _state(client.calls(sid).fetch())


def hang_up(client: Any, sid: str) -> CallState:
    """``completed`` ends a call in progress and cancels one still queued or ringing."""
    return _state(client.calls(sid).update(status="completed"))


def failure_line(exc: Exception, base_url: str | None) -> str | None:
    """What went wrong talking to Twilio, in one line; None for an exception that
    is not the SDK's or the network's (a bug: let its traceback show)."""
    from requests import RequestException
    from twilio.base.exceptions import (  # type: ignore[import-untyped]
        TwilioRestException,
        TwilioServiceException,
    )

    if isinstance(exc, TwilioRestException):
        message = str(exc.msg).partition(": ")[2] or str(exc.msg)
        return _refusal(exc.code, message, exc.status)
    if isinstance(exc, TwilioServiceException):
        return _refusal(exc.code, str(exc.detail or exc.title), exc.status)
    if isinstance(exc, RequestException):
        where = "Twilio's API" if base_url is None else f"Twilio's API at {_origin(base_url)}"
        return f"cannot reach {where}: {_network_reason(exc)}"
    return None


def _refusal(code: object, message: str, status: object) -> str:
    text = _SPACES.sub(" ", redact(message)).strip()[:MESSAGE_LIMIT] or f"HTTP {status}"
    line = f"Twilio refused: {text}"
    if isinstance(code, int):
        line += f" (error {code}, https://www.twilio.com/docs/errors/{code})"
        if code in _HINTS:
            line += f": {_HINTS[code]}"
    return line


def _network_reason(exc: BaseException) -> str:
    """The operating system's words (connection refused, a name not resolved),
    found under the layers requests and urllib3 wrap around them; their own
    messages quote the request's URL."""
    from requests import Timeout

    if isinstance(exc, Timeout):
        return f"no answer within {API_TIMEOUT_S:g} s"
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        item = todo.pop(0)
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, OSError) and item.strerror:
            return str(item.strerror)
        todo.extend([item.__cause__, item.__context__, getattr(item, "reason", None)])
        todo.extend(item.args)
    return "the connection failed"


def _moved(url: str, base_url: str | None) -> str:
    if base_url is None:
        return url
    base, parts = urlsplit(base_url), urlsplit(url)
    return urlunsplit(
        (base.scheme, base.netloc, base.path.rstrip("/") + parts.path, parts.query, "")
    )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def _state(call: Any) -> CallState:
    duration = call.duration
    return CallState(str(call.sid), str(call.status), None if duration is None else str(duration))
