"""ElevenLabs' character alignment attributed to the pieces pushed, without I/O.

Alignment characters are counted against the text sent on the connection (each
piece is sent as ``piece + " "``; the initial space, keepalive spaces and bare
flushes are filler); a chunk that straddles two pieces is split at the first
character of the second, so each ``Voiced`` belongs to one piece, and its
``Alignment`` holds that piece's characters (filler left out).

Separate from the socket engine (``elevenlabs_ws``) so this bookkeeping, which
decides what each chunk of audio is attributed to and what is resent after a
reconnect, can be tested without a server or an event loop.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from ..vocab.audio import AudioChunk, Samples
from .base import Alignment, TtsError, Voiced


class SentText:
    """The characters sent on one connection, and which piece each belongs to
    (None: filler — the initial space, keepalives, bare flushes)."""

    def __init__(self) -> None:
        self.length = 0
        self.owned_end = 0  # end of the last piece text sent
        self._starts: list[int] = []
        self._spans: list[tuple[int, int, int]] = []  # (start, end, piece)

    def add(self, text: str, piece: int | None) -> None:
        start, self.length = self.length, self.length + len(text)
        if piece is not None and text:
            self._starts.append(start)
            self._spans.append((start, self.length, piece))
            self.owned_end = self.length

    def owner(self, position: int) -> int | None:
        i = bisect.bisect_right(self._starts, position) - 1
        if i >= 0:
            _, end, piece = self._spans[i]
            if position < end:
                return piece
        return None


class PieceAttribution:
    """One turn's pieces as sent, how much of each has been voiced, what was sent
    and aligned on the current connection, and the attribution of each audio
    chunk to the pieces it voices."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.texts: list[str] = []  # each piece as sent: text + " "
        self.voiced: list[int] = []  # characters of each piece voiced so far
        self.current = 0  # the piece audio without alignment belongs to
        self.sent = SentText()
        self.aligned = 0  # alignment characters received on this connection
        self.flushed_to = 0  # position in ``sent`` up to which generation was forced

    def new_connection(self) -> None:
        """A re-opened socket: nothing sent or aligned on it yet (what each piece
        has had voiced is kept)."""
        self.sent = SentText()
        self.aligned = self.flushed_to = 0

    def add_piece(self, text: str) -> int:
        """Number the next piece; its text as sent is ``texts[piece]``."""
        self.texts.append(text + " ")
        self.voiced.append(0)
        return len(self.texts) - 1

    def record_sent(self, text: str, piece: int | None, *, flush: bool) -> None:
        """Text sent on the connection (``piece`` None: filler); ``flush``: the
        message forced generation of everything sent so far."""
        self.sent.add(text, piece)
        if flush:
            self.flushed_to = self.sent.length

    @property
    def all_voiced(self) -> bool:
        """Every piece character sent on this connection has been voiced: the
        service is idle."""
        return self.aligned >= self.sent.owned_end

    @property
    def unflushed_waiting(self) -> bool:
        """Everything flushed has been voiced, but piece text sent since waits in
        the service's buffer."""
        return self.aligned >= self.flushed_to and self.sent.owned_end > self.flushed_to

    def unvoiced(self) -> Iterator[tuple[int, str]]:
        """Each piece's text not yet voiced, to send again on a new connection."""
        for piece, text in enumerate(self.texts):
            rest = text[min(self.voiced[piece], len(text)) :]
            if rest:
                yield piece, rest

    def attribute(self, samples: Samples, alignment: object, t_ns: int) -> list[Voiced]:
        """Split one chunk's audio by piece, at the first character of each next
        piece. ``alignment`` is the message's JSON (None: the chunk belongs to the
        current piece); a malformed one is a ``TtsError``."""
        rate = self.sample_rate
        if not isinstance(alignment, dict):
            if not len(samples):
                return []
            return [Voiced(self.current, AudioChunk(samples, rate), None, t_ns)]
        chars = alignment.get("chars") or []
        starts = alignment.get("charStartTimesMs") or []
        durations = alignment.get("charDurationsMs") or alignment.get("charsDurationsMs") or []
        if not (len(chars) == len(starts) == len(durations)):
            raise TtsError("ElevenLabs sent a malformed frame (alignment lists differ in length)")
        # (piece, start ms in the chunk, [(char, start, duration)]) per piece
        groups: list[tuple[int, float, list[tuple[str, float, float]]]] = [(self.current, 0.0, [])]
        for i, char in enumerate(chars):
            piece = self.sent.owner(self.aligned + i)
            if piece is None:
                continue
            if piece != groups[-1][0]:
                groups.append((piece, float(starts[i]), []))
            self.voiced[piece] += 1
            groups[-1][2].append((str(char), float(starts[i]), float(durations[i])))
        self.aligned += len(chars)
        self.current = groups[-1][0]
        items: list[Voiced] = []
        for n, (piece, start_ms, entries) in enumerate(groups):
            begin = _sample_at(start_ms, rate, len(samples)) if n else 0
            end = _sample_at(groups[n + 1][1], rate, len(samples)) if n + 1 < len(groups) else None
            part = samples[begin:end]
            if not len(part) and not entries:
                continue
            aligned = Alignment(
                tuple(c for c, _, _ in entries),
                tuple(max(0.0, s - start_ms) for _, s, _ in entries),
                tuple(d for _, _, d in entries),
            )
            items.append(Voiced(piece, AudioChunk(part, rate), aligned, t_ns))
        return items


def _sample_at(ms: float, rate: int, total: int) -> int:
    return min(total, max(0, round(ms * rate / 1000)))
