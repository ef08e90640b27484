"""The audio sink of a Twilio call: ``phone_sink.PhoneSink`` speaking Twilio
Media Streams (``media``, ``mark``, ``clear``: ``twilio_wire``)."""

from __future__ import annotations

from typing import Any

from .phone_sink import ECHO_TIMEOUT_S as ECHO_TIMEOUT_S
from .phone_sink import MARK_EVERY_S as MARK_EVERY_S
from .phone_sink import SILENT_MARKS_S as SILENT_MARKS_S
from .phone_sink import CallOutbox, PhoneSink
from .twilio_wire import TWILIO


class TwilioSink(PhoneSink):
    def __init__(self, outbox: CallOutbox, stream_sid: str, **options: Any) -> None:
        super().__init__(outbox, stream_sid, TWILIO, **options)
