"""``POST /v1/webrtc/offer``: an SDP offer in, the answer out, a session started.

Two conventions, by the request's Content-Type: WHIP's (``application/sdp``,
answered ``201`` with ``application/sdp``) and Pipecat's small WebRTC
transport's (``application/json`` ``{"sdp", "type": "offer"}``, answered
``200`` with ``{"sdp", "type": "answer", "session"}``). Checked before any
peer is built, as an upgrade to ``/v1/session`` is: the Host and the
locality (in ``server.py``), the Origin, the token (``Authorization: Bearer``,
required here when the server has one: no peer, no UDP socket for a client
that has not authenticated), drain and the session limit. The session itself
then starts on the data channel with ``session.start`` (docs/webrtc.md).
"""

from __future__ import annotations

import json

from websockets.datastructures import Headers, MultipleValuesError
from websockets.http11 import Response

from .http_post import Posted
from .http_routes import response
from .prometheus import RefusedLogin
from .protocol import OFFER_PATH
from .state import ServerState
from .webrtc_host import WebRtcHost
from .webrtc_peer import OfferRefused

MAX_SDP_CHARS = 32 * 1024


def parse_offer(content_type: str | None, body: bytes) -> tuple[str, bool]:
    """The offer's SDP and whether it came as JSON, or ``OfferRefused``."""
    kind = (content_type or "").partition(";")[0].strip().lower()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise OfferRefused("the offer is not UTF-8") from None
    if kind == "application/sdp":
        sdp, as_json = text, False
    elif kind == "application/json":
        try:
            message = json.loads(text)
        except ValueError:
            raise OfferRefused("the offer is not JSON") from None
        if not isinstance(message, dict) or message.get("type") != "offer":
            raise OfferRefused('the offer is {"sdp": …, "type": "offer"}')
        found, as_json = message.get("sdp"), True
        if not isinstance(found, str):
            raise OfferRefused("the offer's sdp is not a string")
        sdp = found
    else:
        raise OfferRefused("send the offer as application/sdp or application/json")
    if not sdp.startswith("v=0") or len(sdp) > MAX_SDP_CHARS:
        raise OfferRefused("malformed SDP offer: it starts with v=0 and is at most 32 KB")
    return sdp, as_json


async def offer_route(
    posted: Posted, host: WebRtcHost, state: ServerState, *, origin_ok: bool
) -> Response:
    request = posted.request
    if request.path.partition("?")[0] != OFFER_PATH:
        return response(404, "not found\n")
    if not origin_ok:
        return response(403, "origin not allowed\n")
    if state.token is not None:
        offered = _bearer(request.headers)
        if offered is None or not state.check_token(offered):
            why: RefusedLogin = "no_token" if offered is None else "wrong_token"
            state.metrics.refused_logins.labels(why).inc()
            state.log("http_refused", status=401, path=OFFER_PATH, reason=why)
            return response(401, "unauthorized: send Authorization: Bearer TOKEN\n")
    if state.draining.is_set() or host.full():
        reason = "draining" if state.draining.is_set() else "full"
        state.metrics.errors.labels(reason).inc()
        state.log("http_refused", status=503, path=OFFER_PATH, reason=reason)
        return response(503, f"{reason}: connect again (another replica)\n")
    try:
        sdp, as_json = parse_offer(request.headers.get("Content-Type"), posted.body)
        answer, session = await host.offer(request, sdp)
    except (OfferRefused, MultipleValuesError) as exc:
        state.metrics.errors.labels("bad_message").inc()
        state.metrics.webrtc_offers.labels("refused").inc()
        state.log("webrtc_refused", status=400, reason=str(exc))
        return response(400, f"{exc}\n")
    except Exception as exc:  # a bug of ours or aiortc's: this offer fails, the server goes on
        state.metrics.errors.labels("internal").inc()
        state.log("webrtc_failed", status=500, reason="internal", error=repr(exc)[:300])
        return response(500, "the server could not answer the offer: connect again\n")
    state.metrics.webrtc_offers.labels("answered").inc()
    state.log("webrtc_offer", session=session, answer_bytes=len(answer))
    if as_json:
        body = json.dumps({"sdp": answer, "type": "answer", "session": session})
        return response(200, body, "application/json")
    return response(201, answer, "application/sdp")


def _bearer(headers: Headers) -> str | None:
    try:
        value = headers.get("Authorization")
    except MultipleValuesError:
        return ""
    if value is None:
        return None
    scheme, _, token = str(value).partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""
