"""Real speech for the fake TTS servers, and the scripts that pace and break them.

``speak(text)`` synthesizes ``text`` with the ``espeak-ng`` program (one short
process per text, cached: a test that repeats a sentence pays once), so what a
fake TTS server sends is audibly the text it was given, judged by
``speech_check``. ``encode`` converts it to the format a client asked for
(raw 16-bit LE mono PCM at a rate, G.711 μ-law at 8 kHz, or a WAV file);
``char_timings`` spreads the audio's duration over the text's characters
(letters and digits weigh more than spaces, sentence punctuation stands for its
pause) — not forced alignment, but close enough to tell which words were heard.

A ``SpeechScript`` says how one request (HTTP) or one connection (WebSocket)
behaves: time to first audio, pacing per character, audio frame length, and at
most one fault. The fakes serve a queue of scripts in order and behave normally
(``SpeechScript()``) once the queue is empty. ``spoken_after_ttfb`` and
``paced_body`` play a script over a raw HTTP audio body.
"""

from __future__ import annotations

import itertools
import re
import struct
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import numpy as np

from ..vocab.audio import Samples, pcm16_from_bytes, resample, ulaw_from_pcm16
from .fake_server import DropConnection, FakeServer, pause

ESPEAK_RATE = 22050
_CACHE_SIZE = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

FaultKind = Literal["http_error", "drop", "stall", "malformed"]


@dataclass(frozen=True, slots=True)
class SpeechFault:
    kind: FaultKind
    after_frames: int = 0  # drop / stall / malformed: audio frames sent first
    status: int = 500  # http_error
    retry_after: float | None = None  # http_error: the retry-after header, seconds
    message: str = "scripted error"
    malformed: Literal["json", "base64"] = "json"  # what the malformed frame breaks


@dataclass(frozen=True, slots=True)
class SpeechScript:
    """How one request or connection behaves (the defaults: normally, at once)."""

    ttfb_s: float = 0.0  # before the first audio of each generation / request
    char_s: float = 0.0  # audio released no faster than this many seconds per character
    frame_ms: int = 100  # audio per frame (WebSocket message, HTTP body chunk)
    fault: SpeechFault | None = None

    @classmethod
    def http_error(
        cls, status: int, *, retry_after: float | None = None, message: str = "scripted error"
    ) -> SpeechScript:
        """Refuse with this status (a WebSocket: the handshake is refused with it)."""
        fault = SpeechFault("http_error", status=status, retry_after=retry_after, message=message)
        return cls(fault=fault)

    @classmethod
    def drop(
        cls, after_frames: int = 0, *, ttfb_s: float = 0.0, char_s: float = 0.0
    ) -> SpeechScript:
        """Cut the connection abruptly after this many audio frames (no isFinal)."""
        return cls(ttfb_s, char_s, fault=SpeechFault("drop", after_frames=after_frames))

    @classmethod
    def stall(
        cls, after_frames: int = 0, *, ttfb_s: float = 0.0, char_s: float = 0.0
    ) -> SpeechScript:
        """Stop sending after this many audio frames; keep the connection open."""
        return cls(ttfb_s, char_s, fault=SpeechFault("stall", after_frames=after_frames))

    @classmethod
    def malformed(
        cls,
        after_frames: int = 0,
        breaks: Literal["json", "base64"] = "json",
        *,
        ttfb_s: float = 0.0,
        char_s: float = 0.0,
    ) -> SpeechScript:
        """Send one broken frame after this many audio frames (invalid JSON, or an
        ``audio`` field that is not base64), then carry on."""
        fault = SpeechFault("malformed", after_frames=after_frames, malformed=breaks)
        return cls(ttfb_s, char_s, fault=fault)

    def fault_at(self, frames_sent: int) -> SpeechFault | None:
        """The mid-stream fault due once ``frames_sent`` audio frames are out."""
        fault = self.fault
        if fault is None or fault.kind == "http_error" or fault.after_frames != frames_sent:
            return None
        return fault


# ---------------------------------------------------------------- synthesis

_cache: OrderedDict[str, Samples] = OrderedDict()
_cache_lock = threading.Lock()


async def speak(text: str, executable: str = "espeak-ng") -> Samples:
    """``text`` spoken by espeak-ng (en-us), mono int16 at ``ESPEAK_RATE``."""
    clean = _CONTROL.sub(" ", text).replace("[[", "[ [").strip()  # "[[" is phoneme input
    if not clean:
        return np.zeros(0, np.int16)
    with _cache_lock:
        if clean in _cache:
            _cache.move_to_end(clean)
            return _cache[clean]
    result = await anyio.run_process([executable, "--stdout", "-v", "en-us"], input=clean.encode())
    samples = _wav_samples(result.stdout)
    with _cache_lock:
        _cache[clean] = samples
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return samples


def _wav_samples(wav: bytes) -> Samples:
    """The PCM of espeak-ng's WAV (its header's sizes are placeholders: read to the end)."""
    if len(wav) < 44 or wav[:4] != b"RIFF":
        raise RuntimeError("espeak-ng wrote no WAV audio")
    rate = struct.unpack_from("<I", wav, 24)[0]
    samples = pcm16_from_bytes(wav[44 : 44 + (len(wav) - 44) // 2 * 2])
    return resample(samples, rate, ESPEAK_RATE)


# ---------------------------------------------------------------- formats


def encode(samples: Samples, rate: int, encoding: Literal["pcm", "ulaw"] = "pcm") -> bytes:
    """``samples`` (at ``ESPEAK_RATE``) as raw mono audio at ``rate``."""
    out = resample(samples, ESPEAK_RATE, rate)
    return ulaw_from_pcm16(out) if encoding == "ulaw" else out.astype("<i2").tobytes()


def sample_width(encoding: Literal["pcm", "ulaw"]) -> int:
    """Bytes per sample of ``encode``'s output."""
    return 1 if encoding == "ulaw" else 2


def wav_header(data_bytes: int, rate: int) -> bytes:
    """A 44-byte header for mono 16-bit PCM of ``data_bytes`` bytes."""
    return b"RIFF" + struct.pack(
        "<I4s4sIHHIIHH4sI",
        36 + data_bytes,
        b"WAVE",
        b"fmt ",
        16,
        1,  # PCM
        1,  # mono
        rate,
        rate * 2,
        2,
        16,
        b"data",
        data_bytes,
    )


# ---------------------------------------------------------------- alignment


def _weight(char: str) -> float:
    if char.isdigit():
        return 3.0  # read as a word
    if char.isalpha():
        return 1.0
    if char in ".!?":
        return 3.0  # the pause after a sentence
    if char in ",;:":
        return 2.0
    return 0.5  # spaces, quotes, other marks


def char_timings(text: str, duration_ms: float) -> tuple[list[float], list[float]]:
    """(start, duration) in ms of each character of ``text`` over ``duration_ms``."""
    weights = np.array([_weight(c) for c in text], dtype=np.float64)
    if len(weights) == 0:
        return [], []
    durations = weights / weights.sum() * duration_ms
    starts = np.concatenate([[0.0], np.cumsum(durations)[:-1]])
    return starts.tolist(), durations.tolist()


def frame_bounds(total_samples: int, rate: int, frame_ms: int) -> list[tuple[int, int]]:
    """[start, end) sample ranges of consecutive frames of ``frame_ms`` each."""
    step = max(1, rate * max(1, frame_ms) // 1000)
    return [(i, min(i + step, total_samples)) for i in range(0, total_samples, step)]


# ---------------------------------------------------------------- pacing an HTTP body


async def sleep_until(deadline: float) -> None:
    """Sleep until ``time.monotonic()`` reaches ``deadline`` (not at all if it has)."""
    await pause(deadline - time.monotonic())


async def spoken_after_ttfb(
    script: SpeechScript, text: str, rate: int, encoding: Literal["pcm", "ulaw"] = "pcm"
) -> bytes:
    """``text`` spoken and encoded, returned no sooner than the script's TTFB
    after the call (synthesis counts towards it, as a real service's would)."""
    began = time.monotonic()
    audio = encode(await speak(text), rate, encoding)
    await sleep_until(began + script.ttfb_s)
    return audio


async def paced_body(
    script: SpeechScript, text: str, audio: bytes, edges: Sequence[int]
) -> AsyncIterator[bytes]:
    """``audio`` cut at the byte offsets ``edges`` into the chunks of a raw HTTP
    body, released at the script's pace per character, its ``drop`` or ``stall``
    due before the chunk it names (or after the last)."""
    for sent, (start, end) in enumerate(itertools.pairwise(edges)):
        await _body_fault(script, sent)
        yield audio[start:end]
        await anyio.sleep(script.char_s * len(text) * (end - start) / max(1, len(audio)))
    await _body_fault(script, len(edges) - 1)


async def _body_fault(script: SpeechScript, sent: int) -> None:
    """A ``drop`` or ``stall`` due once ``sent`` chunks are out (``malformed``
    does not apply to a raw audio body)."""
    fault = script.fault_at(sent)
    if fault is not None and fault.kind == "drop":
        raise DropConnection
    if fault is not None and fault.kind == "stall":
        await anyio.sleep_forever()


# ---------------------------------------------------------------- the servers' shared part


@dataclass(slots=True)
class RecordedConnection:
    """One WebSocket connection as the fake saw it."""

    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    messages: list[Any] = field(default_factory=list)  # parsed JSON (the raw str if not JSON)
    texts: dict[str, str] = field(default_factory=dict)  # context id ("" single) → text
    generations: list[tuple[str, str]] = field(default_factory=list)  # (context id, text)
    frames_sent: int = 0  # audio frames
    close_code: int | None = None  # the code the fake closed with (None: it did not)
    client_closed: bool = False  # the client closed or went away before the fake's close
    dropped: bool = False  # a scripted drop cut it

    @property
    def text(self) -> str:
        """Every text field received, joined in order (all contexts)."""
        return "".join(self.texts.values())


class SpeechServer(FakeServer):
    """What both speech fakes share: the script queue (``SpeechScript``, default
    when empty), the record of WebSocket connections and of every text received,
    and the counts a leak or barge-in test asserts on."""

    def __init__(self, *scripts: SpeechScript) -> None:
        super().__init__()
        self._scripts: deque[SpeechScript] = deque(scripts)
        self.connections: list[RecordedConnection] = []
        self.open_connections = 0  # WebSocket connections open right now
        self.client_closed_early = 0  # WebSockets the client closed before the fake's close
        self._texts: list[str] = []

    def add(self, *scripts: SpeechScript) -> None:  # type: ignore[override]
        """Queue more scripts (one per request or connection, in order)."""
        with self._lock:
            self._scripts.extend(scripts)

    def next_script(self) -> SpeechScript:
        with self._lock:
            return self._scripts.popleft() if self._scripts else SpeechScript()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._scripts)

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self._scripts.clear()
            self.connections.clear()
            self._texts.clear()
            self.client_closed_early = 0

    def note_text(self, text: str) -> None:
        with self._lock:
            self._texts.append(text)

    def text_received(self) -> str:
        """All text received so far (WebSocket messages and HTTP bodies), in order."""
        with self._lock:
            return "".join(self._texts)

    @property
    def early_closes(self) -> int:
        """WebSockets and HTTP streams the client closed before their end."""
        with self._lock:
            return self.client_closed_early + self.cancelled_streams
