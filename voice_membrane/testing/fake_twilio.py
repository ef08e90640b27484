"""A fake Twilio caller: ``fake_phone.FakePhoneCall`` in Twilio's dialect.

It connects as Twilio does (``X-Twilio-Signature`` computed from an auth
token, or a wrong one, or none), after fetching the call's TwiML from the
voice webhook when it has an auth token, and plays what the server sends as a
phone would (``fake_phone``), echoing marks as Twilio documents
(https://www.twilio.com/docs/voice/media-streams/websocket-messages).

::

    async with twilio_call(url, auth_token=TOKEN, parameters={"pipeline": "x"}) as call:
        spoken = await call.say("audio_fixtures/speech/phone/weather_paris.wav")
        await call.wait_for(lambda: call.first_media_after(spoken.ended) is not None, 30)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from .echo_room import PlayedEcho
from .fake_carrier_dialects import TwilioDialect

# (here too: the tests and benchmarks import them from here)
from .fake_phone import CallEnded as CallEnded
from .fake_phone import FakePhoneCall, call_number, phone_call
from .fake_phone import ReceivedMedia as ReceivedMedia
from .fake_phone import Spoken as Spoken
from .fake_twilio_webhook import CallRefused as CallRefused
from .fake_twilio_webhook import fetch_stream_parameters as fetch_stream_parameters
from .fake_twilio_webhook import twilio_signature as twilio_signature

MULAW_8K = dict(TwilioDialect.MULAW_8K)
FakeTwilioCall = FakePhoneCall  # (its old name: a Twilio call was the only kind)


@asynccontextmanager
async def twilio_call(
    url: str,
    *,
    auth_token: str | None = None,
    signature: str | None = None,
    signed_url: str | None = None,
    parameters: Mapping[str, str] | None = None,
    media_format: Mapping[str, Any] = MULAW_8K,
    speed: float = 1.0,
    send_start: bool = True,
    fetch_twiml: bool = True,
    echo_marks: bool = True,
    echo: PlayedEcho | None = None,
) -> AsyncIterator[FakePhoneCall]:
    """A call to ``url``. With an ``auth_token``, first what Twilio does when a
    call comes in (unless ``fetch_twiml`` is False): fetch the TwiML from the
    voice webhook (``twiml_url_for(url)``, a signed GET with the call's
    ``CallSid``), whose ``<Stream>`` parameters go in ``start``'s custom
    parameters (``parameters`` added over them). ``X-Twilio-Signature``:
    ``signature`` if given, else one computed from ``auth_token`` over
    ``signed_url`` (default ``url``; the webhook's, ``twiml_url_for`` it), else
    none. ``media_format``: what ``start`` declares (another one for fault
    tests). ``echo_marks`` False: a stream that never sends marks back. ``echo``:
    the caller's microphone hears what the phone plays.
    ``CallRefused`` if the webhook or the upgrade is refused. On leaving, the
    call hangs up (``stop`` and close) unless it ended already."""
    n = call_number(url)
    call_sid, account_sid = f"CA{n:032x}", f"AC{0:032x}"
    custom: dict[str, str] = {}
    if auth_token is not None and fetch_twiml:
        custom = await fetch_stream_parameters(
            url, auth_token, call_sid, account_sid, signed_url=signed_url
        )
    custom.update(parameters or {})
    headers = {}
    if signature is None and auth_token is not None:
        signature = twilio_signature(auth_token, signed_url or url)
    if signature is not None:
        headers["X-Twilio-Signature"] = signature
    async with phone_call(
        url,
        TwilioDialect(),
        headers=headers,
        parameters=custom,
        media_format=media_format,
        ids=(f"MZ{n:032x}", call_sid, account_sid),
        speed=speed,
        send_start=send_start,
        echo_marks=echo_marks,
        echo=echo,
    ) as call:
        yield call
