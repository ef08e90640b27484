"""The routes of the carriers besides Twilio (Telnyx, Plivo): their secrets
checked at start-up, their HTTP requests (the answer document, the stream's
upgrade) decided before any work, and the call each stream becomes.

Twilio's route stays in ``server.py``, where it began; each carrier here is a
wire (``telnyx_wire``, ``plivo_wire``), a route module (``telnyx_route``,
``plivo_route``) and a few lines below.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import MultipleValuesError
from websockets.http11 import Request, Response

from ..infra.redact import remember
from ..pipeline.config import ConfigError
from .phone_call import PhoneCall
from .plivo_route import ANSWER_PATH, answer_route, plivo_check, plivo_tokens
from .plivo_wire import PLIVO, PLIVO_PATH
from .prometheus import CarrierRefusal, RefusedLogin, ServerMetrics
from .state import ServerState
from .telnyx_route import TEXML_PATH, telnyx_check, telnyx_tokens, texml_route
from .telnyx_route import url_problem as telnyx_url_problem
from .telnyx_wire import TELNYX, TELNYX_PATH

PATHS: Final = frozenset({TELNYX_PATH, TEXML_PATH, PLIVO_PATH, ANSWER_PATH})
STREAMS: Final = frozenset({TELNYX_PATH, PLIVO_PATH})
# (path, why, message) → the 403, logged and counted (``Server._refuse_login``)
Refuse = Callable[[str, RefusedLogin | CarrierRefusal, str], Response]


class CarrierRoutes:
    def __init__(
        self,
        *,
        session_token: str | None,
        telnyx_public_key: str | None,
        telnyx_url: str | None,
        plivo_auth_token: str | None,
        plivo_url: str | None,
    ) -> None:
        """``ConfigError`` (one line) for a configuration that could check no call."""
        if telnyx_url is not None and (problem := telnyx_url_problem(telnyx_url)):
            raise ConfigError(f"--telnyx-url: {problem}")
        # Telnyx: its TeXML webhook signed with Telnyx's key; each call's token
        # keyed by the sessions' token (docs/telephony.md).
        self.telnyx = telnyx_check(telnyx_public_key, telnyx_url, session_token)
        self.telnyx_url = telnyx_url
        self.telnyx_tokens = (
            None if self.telnyx is None or session_token is None else telnyx_tokens(session_token)
        )
        # Plivo: its answer URL signed with the auth token (V3), which keys the tokens.
        plivo_check(plivo_auth_token, plivo_url)
        self.plivo_auth_token, self.plivo_url = plivo_auth_token, plivo_url
        remember(plivo_auth_token)  # masked in every log line from now on
        self.plivo_tokens = None if plivo_auth_token is None else plivo_tokens(plivo_auth_token)

    def count_from_zero(self, metrics: ServerMetrics) -> None:
        """The configured carriers' refusal reasons, at 0 from the start."""
        if self.telnyx is not None:
            metrics.refused_logins.labels("telnyx_signature")
        if self.plivo_auth_token is not None:
            metrics.refused_logins.labels("plivo_signature")

    def request(
        self, request: Request, path: str, host: str, local: bool, refuse: Refuse
    ) -> Response | None:
        """Before any work: a carrier's upgrade (None: go on) or answer request,
        or its 403. ``path`` is one of ``PATHS``."""
        if path in (TELNYX_PATH, TEXML_PATH):
            configured = self.telnyx is not None
            why: RefusedLogin | CarrierRefusal = "telnyx_signature" if configured else "proxied"
            refusal = _refusal(request, configured, local, "no Telnyx public key")
        else:
            configured = self.plivo_auth_token is not None
            why = "plivo_signature" if configured else "proxied"
            refusal = _refusal(request, configured, local, "no Plivo auth token")
        if refusal is not None:
            return refuse(path, why, refusal)
        if path in STREAMS:
            return None  # the WebSocket handshake: the start's token decides
        now = time.time()
        if path == TEXML_PATH:
            stream_url = self.telnyx_url or f"wss://{host}{TELNYX_PATH}"
            answer = texml_route(request, stream_url, self.telnyx, self.telnyx_tokens, now)
        else:
            stream_url = self.plivo_url or f"wss://{host}{PLIVO_PATH}"
            token, tokens = self.plivo_auth_token, self.plivo_tokens
            answer = answer_route(request, stream_url, token, tokens, now)
        return refuse(path, why, answer) if isinstance(answer, str) else answer

    def call(self, ws: ServerConnection, state: ServerState, path: str) -> PhoneCall:
        """The call a stream on ``path`` (one of ``STREAMS``) becomes."""
        if path == TELNYX_PATH:
            return PhoneCall(ws, state, TELNYX, self.telnyx_tokens)
        return PhoneCall(ws, state, PLIVO, self.plivo_tokens)


def _refusal(request: Request, configured: bool, local: bool, missing: str) -> str | None:
    """Why a carrier's request is refused before its signature is read (HTTP 403,
    one line), or None: a browser's, or any but a local one when the carrier's
    secret (``missing``) is not configured."""
    try:
        origin = request.headers.get("Origin")
    except MultipleValuesError:
        return "a header is repeated"
    if origin is not None:
        return "the phone route is not for browsers"
    if not configured and not local:
        return f"{missing} is configured: phone calls are refused"
    return None
