"""A fake Twilio REST API (the Calls resource) on loopback, for the official
``twilio`` SDK and ``voice-membrane call``.

Endpoints (``base_url`` is ``http://127.0.0.1:PORT``; the real origin is
``https://api.twilio.com``), as Twilio's API reference gives them
(https://www.twilio.com/docs/voice/api/call-resource):

- ``POST /2010-04-01/Accounts/{AccountSid}/Calls.json`` — form-encoded ``To``,
  ``From``, ``Url`` and ``Method``, ``StatusCallback``,
  ``StatusCallbackEvent`` (repeated), ``StatusCallbackMethod``; 201 with the
  Call resource's JSON (``status`` ``queued``), then the call progresses
  (``fake_twilio_progress``: the TwiML fetched from ``Url``, signed status
  callbacks);
- ``GET /2010-04-01/Accounts/{AccountSid}/Calls/{CallSid}.json`` — the call;
- ``POST …/Calls/{CallSid}.json`` with ``Status=completed`` (hang up, or
  cancel a call not yet answered) or ``Status=canceled`` (only a call not yet
  answered).

HTTP basic auth: the Account SID and its auth token, or an API key SID
(``SK…``) and its secret. Errors are Twilio's JSON, ``{"code", "message",
"more_info", "status"}``: 401 ``20003`` (bad credentials), 404 ``20404``,
400 ``21201``/``21213`` (no To/From), ``21205`` (no Url), ``21211`` (a To
that is no phone number), ``21210`` (a From that is not the account's),
``21220`` (hanging up a call that has ended), and whatever ``refusals`` scripts
for a number (``21214``: cannot be reached, …).

::

    with FakeTwilioRest(numbers={"+15005550006"}) as twilio:
        env = {**os.environ, **twilio.env()}  # TWILIO_BASE_URL and the credentials
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import secrets
import threading
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .fake_twilio_progress import API_VERSION, ENDED, FakeCall, Outcome, Progress
from .loopback import LoopbackApp

ACCOUNT_SID: Final = "AC" + "f" * 32
AUTH_TOKEN: Final = "fake-twilio-auth-token-0123456789"
FROM_NUMBER: Final = "+15005550006"
_CALLS: Final = "/2010-04-01/Accounts/{account}/Calls"


@dataclass(frozen=True, slots=True)
class RestRequest:
    method: str
    path: str
    form: tuple[tuple[str, str], ...]
    username: str | None  # the basic auth user (an Account SID or API key SID)


class FakeTwilioRest(LoopbackApp):
    def __init__(
        self,
        *,
        account_sid: str = ACCOUNT_SID,
        auth_token: str = AUTH_TOKEN,
        api_keys: Mapping[str, str] | None = None,
        numbers: Collection[str] = (FROM_NUMBER,),
        refusals: Mapping[str, tuple[int, str]] | None = None,
        outcomes: Mapping[str, Outcome] | None = None,
        talk_s: float = 1.0,
        step_s: float = 0.1,
        sign_as: Callable[[str], str] = lambda url: url,
    ) -> None:
        self.account_sid, self.auth_token = account_sid, auth_token
        self.api_keys = dict(api_keys or {})  # key SID → secret
        self.numbers = set(numbers)  # the account's numbers: the only From it takes
        self.refusals = dict(refusals or {})  # a To → (Twilio error code, message), 400
        self.progress = Progress(auth_token, step_s, talk_s, dict(outcomes or {}), sign_as)
        self.requests: list[RestRequest] = []
        self.calls: dict[str, FakeCall] = {}
        self._lock = threading.Lock()
        self._tasks: TaskGroup | None = None
        super().__init__("twilio-rest-fake", lifespan="on")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """What points ``voice-membrane call`` at this fake, with its credentials."""
        return {
            "TWILIO_BASE_URL": self.base_url,
            "TWILIO_ACCOUNT_SID": self.account_sid,
            "TWILIO_AUTH_TOKEN": self.auth_token,
        }

    def wait_ended(self, sid: str, timeout_s: float = 30.0) -> FakeCall:
        """The call once it has ended and its last callback was delivered (blocks:
        from async code, in a worker thread)."""
        call = self.calls[sid]
        if not call.done.wait(timeout_s):
            raise TimeoutError(f"call {sid} did not end within {timeout_s} s")
        return call

    # ------------------------------------------------------------ the API

    def routes(self) -> Sequence[Route]:
        return [
            Route(_CALLS + ".json", self._create, methods=["POST"]),
            Route(_CALLS + "/{sid}.json", self._fetch, methods=["GET"]),
            Route(_CALLS + "/{sid}.json", self._update, methods=["POST"]),
        ]

    async def _create(self, request: Request) -> JSONResponse:
        form, refused = await self._admit(request)
        if refused is not None:
            return refused
        first = {name: value for name, value in reversed(form)}
        to, from_, url = first.get("To"), first.get("From"), first.get("Url")
        if not to:
            return error(400, 21201, "No 'To' number is specified")
        if not from_:
            return error(400, 21213, "No 'From' number is specified")
        if not url:
            return error(400, 21205, "Url parameter is required.")
        if not _dialable(to):
            return error(400, 21211, f"The 'To' number {to} is not a valid phone number.")
        if from_ not in self.numbers:
            return error(
                400,
                21210,
                f"The source phone number provided, {from_}, is not yet verified for your "
                "account. You may only make calls from phone numbers that you've verified "
                "or purchased from Twilio.",
            )
        if to in self.refusals:
            code, message = self.refusals[to]
            return error(400, code, message)
        call = FakeCall(
            sid="CA" + secrets.token_hex(16),
            account_sid=self.account_sid,
            to=to,
            from_=from_,
            url=url,
            method=first.get("Method", "POST").upper(),
            status_callback=first.get("StatusCallback"),
            status_callback_method=first.get("StatusCallbackMethod", "POST").upper(),
            # Without StatusCallbackEvent, only the completed event is sent.
            events=tuple(v for n, v in form if n == "StatusCallbackEvent") or ("completed",),
            hang_up=anyio.Event(),
        )
        with self._lock:
            self.calls[call.sid] = call
        assert self._tasks is not None
        self._tasks.start_soon(self.progress.run, call)
        return JSONResponse(self._resource(call), status_code=201)

    async def _fetch(self, request: Request) -> JSONResponse:
        _, refused = await self._admit(request)
        call = self.calls.get(request.path_params["sid"])
        if refused is not None or call is None:
            return refused or not_found(request.url.path)
        return JSONResponse(self._resource(call))

    async def _update(self, request: Request) -> JSONResponse:
        form, refused = await self._admit(request)
        call = self.calls.get(request.path_params["sid"])
        if refused is not None or call is None:
            return refused or not_found(request.url.path)
        status = dict(form).get("Status")
        if status not in ("completed", "canceled"):
            return error(400, 20001, "Status must be completed or canceled")
        if call.status in ENDED:
            return error(400, 21220, "Call is not in-progress. Cannot redirect.")
        if status == "completed" or call.status != "in-progress":
            call.end("completed" if call.status == "in-progress" else "canceled")
            assert call.hang_up is not None
            call.hang_up.set()
        return JSONResponse(self._resource(call))

    async def _admit(self, request: Request) -> tuple[list[tuple[str, str]], JSONResponse | None]:
        """The request's form, recorded; a refusal for wrong credentials."""
        form = [(n, v) for n, v in (await request.form()).multi_items() if isinstance(v, str)]
        username, password = _basic_auth(request.headers.get("authorization"))
        with self._lock:
            self.requests.append(
                RestRequest(request.method, request.url.path, tuple(form), username)
            )
        account = request.path_params["account"]
        if account != self.account_sid or not self._authenticates(username, password):
            return form, error(401, 20003, "Authenticate")
        return form, None

    def _authenticates(self, username: str | None, password: str | None) -> bool:
        if username is None or password is None:
            return False
        if username == self.account_sid:
            return secrets.compare_digest(password, self.auth_token)
        expected = self.api_keys.get(username)
        return expected is not None and secrets.compare_digest(password, expected)

    def _resource(self, call: FakeCall) -> dict[str, Any]:
        uri = f"/{API_VERSION}/Accounts/{call.account_sid}/Calls/{call.sid}"
        return {
            "sid": call.sid,
            "account_sid": call.account_sid,
            "api_version": API_VERSION,
            "date_created": _date(call.created),
            "date_updated": _date(call.ended or call.started or call.created),
            "start_time": None if call.started is None else _date(call.started),
            "end_time": None if call.ended is None else _date(call.ended),
            "direction": "outbound-api",
            "to": call.to,
            "to_formatted": call.to,
            "from": call.from_,
            "from_formatted": call.from_,
            "status": call.status,
            "duration": None if call.duration_s is None else str(call.duration_s),
            "price": None,
            "price_unit": "USD",
            "answered_by": None,
            "caller_name": None,
            "forwarded_from": None,
            "parent_call_sid": None,
            "phone_number_sid": None,
            "group_sid": None,
            "trunk_sid": None,
            "queue_time": "0",
            "annotation": None,
            "uri": uri + ".json",
            "subresource_uris": {"notifications": uri + "/Notifications.json"},
        }

    # ------------------------------------------------------------ lifecycle

    @asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()  # calls still going on end with the fake

    def app(self) -> Starlette:
        return Starlette(routes=self.routes(), lifespan=self._lifespan)


def error(status: int, code: int, message: str) -> JSONResponse:
    """Twilio's error body."""
    body = {
        "code": code,
        "message": message,
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }
    return JSONResponse(body, status_code=status)


def not_found(path: str) -> JSONResponse:
    return error(404, 20404, f"The requested resource {path} was not found")


def _dialable(number: str) -> bool:
    """What Twilio dials: an E.164 number (a SIP or client address is not faked)."""
    digits = number.removeprefix("+")
    return number.startswith("+") and digits.isdigit() and 2 <= len(digits) <= 15


def _basic_auth(header: str | None) -> tuple[str | None, str | None]:
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return None, None
    try:
        user, colon, password = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    return (user, password) if colon else (None, None)


def _date(when: float) -> str:
    return email.utils.formatdate(when, usegmt=False).replace("-0000", "+0000")
