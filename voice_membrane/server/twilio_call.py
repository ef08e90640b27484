"""One phone call on ``/v1/twilio``: ``phone_call.PhoneCall`` over Twilio Media
Streams (``twilio_wire``), its ``start`` checked against the call tokens of
``serve``'s TwiML (``twilio_call_token``) when an auth token is configured."""

from __future__ import annotations

from websockets.asyncio.server import ServerConnection

from .phone_call import KeyTally as KeyTally
from .phone_call import PhoneCall
from .state import ServerState
from .twilio_wire import TWILIO


class TwilioCall(PhoneCall):
    def __init__(self, ws: ServerConnection, state: ServerState) -> None:
        super().__init__(ws, state, TWILIO, state.call_tokens)
