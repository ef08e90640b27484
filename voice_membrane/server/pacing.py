"""How a network sink paces a reply to a client that plays what it is sent:
never more than ``lead_s`` ahead of the client's playback, and, once a frame
would pass that, a wait until the client holds only ``lead_s - refill_s``, so
frames go out ``refill_s`` at a time (one wake-up, one pass of the event loop
and one socket write per batch, not per frame). Shared by the WebSocket sink
and a phone call's (``socket_sink.py``, ``twilio_sink.py``).
"""

from __future__ import annotations

LEAD_S = 0.2
# How far below the lead a paced write sleeps: 60 ms of frames per wake-up (a
# third of the wake-ups), and the client still holds at least 140 ms: a network
# hiccup shorter than that is not heard. (100 ms saved a little more CPU under
# load and left only 100 ms of margin.)
REFILL_S = 0.06
# A paced wait ends on this grid of the monotonic clock (``perf_counter_ns``,
# the event loop's too): the sessions due within the same 10 ms wake in one
# pass of the event loop, not one pass each. The client then holds at least
# 130 ms instead of 140.
GRID_NS = 10_000_000


class BatchPacer:
    def __init__(self, frame_s: float, lead_s: float = LEAD_S, refill_s: float = REFILL_S) -> None:
        self.lead_s = lead_s
        self.refill_s = min(refill_s, lead_s)
        # What the turn writes at a time (SinkStage): one batch, at least one frame.
        self.write_block_s = max(frame_s, self.refill_s)
        self._frame_ns = round(frame_s * 1e9)
        self._lead_ns = round(lead_s * 1e9)
        self._low_ns = round((lead_s - self.refill_s) * 1e9)

    def running_low(self, ends_ns: int, now_ns: int) -> bool:
        """Whether the client holds less than ``lead_s - refill_s`` (what the
        batches keep it above): a sink then sends even a part of a frame rather
        than hold it back for the voice's next chunk (at a turn's start the
        client holds little, and a frame held back can be heard as a gap)."""
        return ends_ns - now_ns < self._low_ns

    def wait_s(self, ends_ns: int, now_ns: int) -> float:
        """Seconds to wait before the next frame, when the audio sent so far ends
        playing at ``ends_ns`` and it is ``now_ns`` (one clock): 0 within the
        lead; past it, until the client holds ``lead_s - refill_s``, and on to
        the next point of the pacing grid (``GRID_NS``)."""
        ahead_ns = ends_ns - now_ns
        if ahead_ns + self._frame_ns <= self._lead_ns:
            return 0.0
        until_ns = now_ns + max(0, ahead_ns - self._low_ns)
        return (-(-until_ns // GRID_NS) * GRID_NS - now_ns) / 1e9  # (on to the grid)
