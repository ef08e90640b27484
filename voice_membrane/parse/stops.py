"""StopScanner: client-side stop sequences over a text stream (sans-I/O).

Some endpoints leak a stop string into the output, cap how many stop sequences
a request may carry (OpenAI 4, Gemini 5), or mark the end of a turn with a
token the model writes (Gemini prefill's ``<|eot|>``). A provider feeds the
reply text through a ``StopScanner``: text that may still be the start of a stop
sequence is held back; when one completes, the text before it is released and
``stopped`` names it; nothing after it is released.
"""

from __future__ import annotations

from collections.abc import Sequence


class StopScanner:
    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped: str | None = None  # the stop sequence found, once found

    def feed(self, text: str) -> str:
        """The text that is now safe to release (never part of a stop sequence)."""
        if self.stopped is not None:
            return ""
        if not self._stops:
            return text
        buffer = self._held + text
        # The stop the model completed first wins (as on the server, which checks
        # after every token): the earliest end; of two ending together, the longer.
        # Choosing by earliest start instead would depend on how the text was cut
        # when one stop contains another ("\nUser:" and "User").
        first: tuple[int, int, str] | None = None  # (end, start, stop)
        for stop in self._stops:
            at = buffer.find(stop)
            if at >= 0 and (first is None or (at + len(stop), at) < first[:2]):
                first = (at + len(stop), at, stop)
        if first is not None:
            self.stopped = first[2]
            self._held = ""
            return buffer[: first[1]]
        keep = 0  # the longest tail of buffer that begins some stop sequence
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buffer)), keep, -1):
                if buffer.endswith(stop[:n]):
                    keep = n
                    break
        self._held = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        """End of stream: a held partial match was not a stop after all."""
        held, self._held = self._held, ""
        return "" if self.stopped is not None else held
