"""What ``voice-membrane call`` asks Twilio for, checked before any request.

Sans-I/O: the numbers (E.164), serve's public address and the URLs Twilio
is given, made from it — the voice webhook (``/v1/twilio/twiml``, which
answers the TwiML with the call's own token), the status callback
(``/v1/twilio/status``) and the readiness check (``/readyz``) — and the
credentials taken from the environment. Each problem is one line that shows
no secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlencode, urlsplit

from ..infra.redact import quote
from ..vendors.credentials import key_problem

ACCOUNT_SID_VARIABLE: Final = "TWILIO_ACCOUNT_SID"
AUTH_TOKEN_VARIABLE: Final = "TWILIO_AUTH_TOKEN"
API_KEY_VARIABLE: Final = "TWILIO_API_KEY"
API_SECRET_VARIABLE: Final = "TWILIO_API_SECRET"
FROM_VARIABLE: Final = "TWILIO_FROM_NUMBER"
# Ours (the SDK reads no such variable): another origin for Twilio's REST API,
# a fake on loopback in tests.
BASE_URL_VARIABLE: Final = "TWILIO_BASE_URL"

TWIML_PATH: Final = "/v1/twilio/twiml"
STATUS_PATH: Final = "/v1/twilio/status"
READY_PATH: Final = "/readyz"
# The progress events the status callback is asked for (all of them).
STATUS_EVENTS: Final = ("initiated", "ringing", "answered", "completed")

# E.164: "+", a country code that does not start with 0, at most 15 digits in all.
_E164 = re.compile(r"\+[1-9][0-9]{1,14}")
_ACCOUNT_SID = re.compile(r"AC[0-9a-fA-F]{32}")
_API_KEY_SID = re.compile(r"SK[0-9a-fA-F]{32}")
_LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")
_PIPELINE = re.compile(r"[A-Za-z0-9_.-]{1,100}")  # as serve's voice webhook takes it


class PlanError(ValueError):
    """What makes the call impossible to place, in one line."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """HTTP basic auth for Twilio's REST API: the Account SID and auth token,
    or an API key and its secret (``account_sid`` names the account either way)."""

    account_sid: str
    username: str
    password: str

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.password,)


@dataclass(frozen=True, slots=True)
class OutboundCall:
    to: str
    from_: str
    twiml_url: str  # serve's voice webhook, with the pipeline in its query
    status_url: str  # serve's status callback route
    ready_url: str  # serve's /readyz, asked before the call is placed


def phone_number(number: str, option: str) -> str:
    """``number`` if it is E.164 (``+14155550123``), else ``PlanError``."""
    if _E164.fullmatch(number):
        return number
    raise PlanError(
        f"{option} {quote(number)} is not a phone number in E.164 form: +, the country "
        "code and the number, digits only, at most 15 (e.g. +14155550123)"
    )


def serve_base(url: str) -> str:
    """serve's public address (``https://voice.example.com``, perhaps with the
    path prefix a proxy adds), without a trailing slash; ``PlanError`` otherwise."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (parsed lazily: a bad port raises only here)
    except ValueError:
        raise PlanError(f"--url {quote(url)} is not a URL") from None
    if parts.scheme in ("ws", "wss"):
        raise PlanError(
            f"--url is serve's public https:// address (https://{parts.hostname or 'HOST'}), "
            "not the stream's wss:// URL: Twilio fetches the call's TwiML from it"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PlanError(f"--url {quote(url)}: expected serve's address, https://HOST")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise PlanError(f"--url {quote(url)}: serve's address has no query, fragment or user")
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK:
        # serve checks Twilio's signatures for https:// URLs (the scheme Twilio calls).
        raise PlanError(
            f"--url {quote(url)}: Twilio reaches serve over https:// (http:// only for a "
            "serve on this machine, as in tests)"
        )
    return url.rstrip("/")


def outbound_call(to: str, from_: str, url: str, pipeline: str | None) -> OutboundCall:
    """The call to place, every value checked; ``PlanError`` (one line) otherwise."""
    to = phone_number(to, "the number to call,")
    from_ = phone_number(from_, "--from")
    base = serve_base(url)
    query = ""
    if pipeline is not None:
        if not _PIPELINE.fullmatch(pipeline):
            raise PlanError(
                f"--pipeline {quote(pipeline)}: the name of one of serve's pipelines "
                "(its file's stem: letters, digits, _ . -), e.g. local-voice"
            )
        query = "?" + urlencode({"pipeline": pipeline})
    return OutboundCall(
        to=to,
        from_=from_,
        twiml_url=base + TWIML_PATH + query,
        status_url=base + STATUS_PATH,
        ready_url=base + READY_PATH,
    )


def credentials_from(environ: Mapping[str, str]) -> Credentials:
    """The REST API's credentials from the environment (never the command line,
    where ``ps`` shows them); ``PlanError`` naming what is missing or unusable."""
    account_sid = environ.get(ACCOUNT_SID_VARIABLE)
    api_key, api_secret = environ.get(API_KEY_VARIABLE), environ.get(API_SECRET_VARIABLE)
    token = environ.get(AUTH_TOKEN_VARIABLE)
    if not account_sid:
        raise PlanError(
            f"no Twilio credentials: set {ACCOUNT_SID_VARIABLE} and {AUTH_TOKEN_VARIABLE} "
            f"(or {API_KEY_VARIABLE} and {API_SECRET_VARIABLE} with {ACCOUNT_SID_VARIABLE})"
        )
    if not _ACCOUNT_SID.fullmatch(account_sid):
        raise PlanError(f"{ACCOUNT_SID_VARIABLE} is not an Account SID (AC and 32 hex digits)")
    if api_key or api_secret:
        if not api_key or not api_secret:
            raise PlanError(f"{API_KEY_VARIABLE} and {API_SECRET_VARIABLE} go together")
        if not _API_KEY_SID.fullmatch(api_key):
            raise PlanError(f"{API_KEY_VARIABLE} is not an API key SID (SK and 32 hex digits)")
        _check_secret(api_secret, API_SECRET_VARIABLE)
        return Credentials(account_sid, api_key, api_secret)
    if not token:
        raise PlanError(
            f"no Twilio auth token: set {AUTH_TOKEN_VARIABLE} "
            f"(or {API_KEY_VARIABLE} and {API_SECRET_VARIABLE})"
        )
    _check_secret(token, AUTH_TOKEN_VARIABLE)
    return Credentials(account_sid, account_sid, token)


def _check_secret(secret: str, variable: str) -> None:
    problem = key_problem(secret)
    if problem:
        raise PlanError(f"{variable} {problem}")
