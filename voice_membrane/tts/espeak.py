"""eSpeak NG: robotic but near-instant speech from the ``espeak-ng`` program.

How ``espeak-ng --stdout`` frames its output (measured on espeak-ng 1.51, Debian,
and read in its ``src/espeak-ng.c``): reading text from stdin it synthesizes one
line at a time (``fgets`` into a 1000-byte buffer, so longer lines are cut), and
writes ONE 44-byte WAV header, on its first audio, with placeholder sizes
(RIFF 0x7ffff024, data 0x7ffff000), followed by the PCM of every line back to
back. It flushes stdout after each line, so a line's audio reaches the pipe
before the next line is read, but nothing in the byte stream says where one
line's audio ends. No sentinel line fixes that: a marker word's samples are not
reproducible (they depend on the synthesizer's state: random breath noise, echo,
pitch phase), a blank line yields a state-dependent run of zeros (ambiguous
with pauses), and the phoneme trace (``-x --phonout``) is block-buffered until
exit.

End of file is the only exact end-of-utterance signal, so each piece gets its
own process: the text is written, stdin closed, and stdout read to EOF. A fresh
process would cost ~13 ms before the first audio (start-up and voice loading),
so the engine keeps a *warm spare*: a process started ahead of time that has
loaded its voice and waits on stdin. A piece's first chunk then arrives ~0.5 ms
after its text is written; the next spare is started once the current piece's
audio is all out (espeak-ng is ~50 times faster than real time, so its
start-up overlaps the piece's playback). Not earlier: starting a process
blocks the event loop for a few milliseconds, and right after the first chunk
that delayed the chunk's way to the sink (pipeline added 0.6 → 4 ms at p50).

Cancellation is trivial and leak-free: the piece's process is killed and reaped,
and the next piece reads a different process, so no leftover audio can reach
it. If a process dies, the error names its exit code and stderr; the next piece
simply uses a new process.
"""

from __future__ import annotations

import re
import struct
import subprocess
from collections.abc import AsyncGenerator
from contextlib import aclosing, suppress

import anyio
from anyio.abc import Process

from ..infra.surrogates import unspeakable_to_space
from ..vocab.audio import AudioChunk, pcm16_from_bytes
from .base import TtsError
from .piece_stream import PieceEngine

_HEADER_BYTES = 44
_MAX_LINE_BYTES = 900  # espeak-ng reads stdin with fgets(buf, 1000): stay below
_BATCH_BYTES = 8192  # text written to one process at once (pipe buffers are >= 16 KiB)
_CHUNK_MS = 40
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PHONEME_OPEN = re.compile(r"\[(?=\[)")  # "[[" starts raw phoneme input in the CLI


class EspeakEngine(PieceEngine):
    """Speech from ``espeak-ng``, one warm process per piece (see the module docstring).

    Use it from one event loop: ``start``, ``synthesize`` and ``aclose`` share
    processes that belong to the loop that started them.
    """

    name = "espeak"

    def __init__(
        self, voice: str = "en-us", speed_wpm: int = 175, executable: str = "espeak-ng"
    ) -> None:
        self.voice = voice
        self.speed_wpm = speed_wpm
        self.executable = executable
        self.sample_rate = 22050  # replaced by the WAV header's rate in start()
        self._spare: Process | None = None
        self._closed = False

    async def start(self) -> None:
        """Check program and voice with a one-word synthesis (also learns the
        sample rate), then start the first spare."""
        self._closed = False
        async with aclosing(self._speak(await self._spawn(), ["a"])) as chunks:
            async for _ in chunks:
                pass
        await self._ensure_spare()

    async def synthesize(
        self, text: str, previous_text: str = ""
    ) -> AsyncGenerator[AudioChunk, None]:
        try:
            for lines in _batches(_text_lines(text)):
                # aclosing: an early exit must reap this piece's process now, not at GC
                async with aclosing(self._speak(await self._take(), lines)) as chunks:
                    async for chunk in chunks:
                        yield chunk
                await self._ensure_spare()  # for the next batch or piece
        finally:
            # A cancelled or failed piece still leaves a spare for the next one.
            with anyio.CancelScope(shield=True):
                await self._ensure_spare()

    async def aclose(self) -> None:
        self._closed = True
        spare, self._spare = self._spare, None
        if spare is not None:
            with anyio.CancelScope(shield=True):
                await _reap(spare)

    async def _spawn(self) -> Process:
        command = [
            self.executable,
            "--stdout",
            "-v",
            self.voice,
            "-s",
            str(self.speed_wpm),
        ]
        try:
            return await anyio.open_process(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except FileNotFoundError:
            raise TtsError(
                f"{self.executable} not found: install the Debian package espeak-ng"
            ) from None
        except PermissionError as exc:
            raise TtsError(f"cannot run {self.executable}: {exc}") from None

    async def _take(self) -> Process:
        """The spare, or a new process; shielded: a process must reach _speak()
        (which reaps it) or be reaped here."""
        spare, self._spare = self._spare, None
        if spare is not None and spare.returncode is None:
            return spare
        with anyio.CancelScope(shield=True):
            if spare is not None:
                await _reap(spare)  # died while waiting
            proc = await self._spawn()
        return proc

    async def _ensure_spare(self) -> None:
        if self._closed or self._spare is not None:
            return  # a dead spare is replaced by _take()
        try:
            with anyio.CancelScope(shield=True):  # never leave a half-started process
                proc = await self._spawn()
        except TtsError:
            return  # the next piece spawns again and reports the error
        if self._closed or self._spare is not None:  # closed, or another task won the race
            with anyio.CancelScope(shield=True):
                await _reap(proc)
        else:
            self._spare = proc

    async def _speak(self, proc: Process, lines: list[str]) -> AsyncGenerator[AudioChunk, None]:
        """Feed ``lines`` to ``proc``, close its stdin and stream its PCM until EOF."""
        assert proc.stdin is not None and proc.stdout is not None
        try:
            try:
                await proc.stdin.send("".join(f"{line}\n" for line in lines).encode())
                await proc.stdin.aclose()
            except (anyio.BrokenResourceError, OSError):
                pass  # it died before reading: reported below with its exit code
            header = b""
            pending = bytearray()
            chunk_bytes = 0
            while True:
                try:
                    data = await proc.stdout.receive(65536)
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    break
                if len(header) < _HEADER_BYTES:
                    need = _HEADER_BYTES - len(header)
                    header += data[:need]
                    data = data[need:]
                    if len(header) < _HEADER_BYTES:
                        continue
                    self.sample_rate = _parse_header(header)
                    chunk_bytes = 2 * max(1, self.sample_rate * _CHUNK_MS // 1000)
                pending += data
                while len(pending) >= chunk_bytes:
                    samples = pcm16_from_bytes(bytes(pending[:chunk_bytes]))
                    del pending[:chunk_bytes]
                    yield AudioChunk(samples, self.sample_rate)
            code = await proc.wait()
            if code != 0:
                raise TtsError(
                    f"{self.executable} exited with code {code}: {await _stderr_text(proc)}"
                )
            if 0 < len(header) < _HEADER_BYTES:
                raise TtsError(f"{self.executable} wrote a truncated WAV header")
            tail = len(pending) - len(pending) % 2
            if tail:
                yield AudioChunk(pcm16_from_bytes(bytes(pending[:tail])), self.sample_rate)
        finally:
            with anyio.CancelScope(shield=True):
                await _reap(proc)


def _text_lines(text: str) -> list[str]:
    """``text`` as espeak-ng input lines: one line unless it is too long."""
    flat = " ".join(_CONTROL.sub(" ", unspeakable_to_space(text)).split())
    flat = _PHONEME_OPEN.sub("[ ", flat)
    lines: list[str] = []
    current = ""
    for word in flat.split(" ") if flat else []:
        candidate = f"{current} {word}" if current else word
        if len(candidate.encode()) <= _MAX_LINE_BYTES:
            current = candidate
            continue
        if current:
            lines.append(current)
        current = word
        while len(current.encode()) > _MAX_LINE_BYTES:  # one huge "word", e.g. a URL
            cut = _MAX_LINE_BYTES // 4  # 4 bytes per character at most in UTF-8
            lines.append(current[:cut])
            current = current[cut:]
    if current:
        lines.append(current)
    return lines


def _batches(lines: list[str]) -> list[list[str]]:
    """``lines`` grouped so that each group's text fits in a pipe buffer.

    The whole group is written before any audio is read; a group larger than the
    pipe buffer would block on a process that is itself blocked writing audio.
    """
    batches: list[list[str]] = []
    size = _BATCH_BYTES
    for line in lines:
        n = len(line.encode()) + 1
        if size + n > _BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(line)
        size += n
    return batches


def _parse_header(header: bytes) -> int:
    """Sample rate from espeak-ng's streaming WAV header (sizes are placeholders)."""
    riff, _, wave, fmt, _, audio_format, channels, rate, _, _, bits, data, _ = struct.unpack(
        "<4sI4s4sIHHIIHH4sI", header
    )
    if (riff, wave, fmt, data) != (b"RIFF", b"WAVE", b"fmt ", b"data") or (
        audio_format,
        channels,
        bits,
    ) != (1, 1, 16):
        raise TtsError(f"espeak-ng wrote an unexpected WAV header: {header!r}")
    return int(rate)


async def _stderr_text(proc: Process) -> str:
    """What ``proc`` wrote to stderr. Read only after it exited: espeak-ng writes a
    line or two, far below the pipe buffer, so it cannot block on it."""
    if proc.stderr is None:
        return ""
    parts: list[bytes] = []
    with anyio.move_on_after(1):
        try:
            while True:
                parts.append(await proc.stderr.receive())
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass
    return b"".join(parts).decode(errors="replace").strip() or "(no stderr)"


async def _reap(proc: Process) -> None:
    """Kill ``proc`` if it still runs, close its pipes and wait for it."""
    if proc.returncode is None:
        with suppress(ProcessLookupError):  # it may exit between the check and the kill
            proc.kill()
    await proc.aclose()
