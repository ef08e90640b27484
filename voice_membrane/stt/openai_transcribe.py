"""OpenAI transcription over the official SDK's Realtime WebSocket (a
transcription session, ``client.realtime.connect(extra_query={"intent":
"transcription"})``): one session per utterance.

Why the Realtime session and not ``audio.transcriptions.create(stream=True)``
per utterance: the audio is uploaded *while the user speaks*, so at the end of
speech only the commit and the model's decoding remain — an upload of the
whole utterance at the end (a WAV built then) costs its transfer time on every
turn. Models that transcribe as audio arrives (``gpt-realtime-whisper``) also
send deltas while the user speaks; the others send them right after the commit.

Audio: pushed at 16 kHz, resampled to the session's pcm16 24 kHz. The session
has no server VAD (``turn_detection: null``): our VAD decides, and
``finalize()`` commits the buffer. Deltas are partials (the text so far), the
``completed`` event is the final, and ends the stream. Under 100 ms of audio is
not committed (the API refuses it): the stream ends with no final.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self

import anyio
import openai

from ..infra.redact import quote, remember
from ..vendors.errors import ProviderError
from ..vendors.openai_client import KEY_ENV, async_client
from ..vocab.audio import Samples, resample
from ..vocab.transcripts import Transcript
from .base import SttError
from .socket_errors import closed_normally, socket_error, transport_error

NAME = "openai"
SAMPLE_RATE = 16000
SESSION_RATE = 24000
MIN_COMMIT_S = 0.1
DELTA = "conversation.item.input_audio_transcription.delta"
COMPLETED = "conversation.item.input_audio_transcription.completed"
FAILED = "conversation.item.input_audio_transcription.failed"
RETRYABLE_CODES = ("rate_limit_exceeded", "server_error", "internal_error", "session_expired")


class OpenAIStt:
    """``openai:MODEL`` (e.g. ``gpt-4o-mini-transcribe``, ``gpt-4o-transcribe``)."""

    sample_rate = SAMPLE_RATE
    local = False

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        language: str | None = "en",
        prompt: str | None = None,
        finalize_timeout_s: float = 5.0,
    ) -> None:
        self.model, self.name = model, f"{NAME}:{model}"
        self._key, self._base_url = api_key, base_url
        self._finalize_timeout_s = finalize_timeout_s
        transcription: dict[str, Any] = {"model": model}
        if language:
            transcription["language"] = language
        if prompt:
            transcription["prompt"] = prompt
        self._session: dict[str, Any] = {
            "type": "transcription",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": SESSION_RATE},
                    "transcription": transcription,
                    "turn_detection": None,
                }
            },
        }
        self._client: openai.AsyncOpenAI | None = None

    async def start(self) -> None:
        try:
            self._client = async_client(self._key, self._base_url, timeout=10.0)
        except ProviderError as exc:
            raise SttError(f"{NAME}: {exc.detail}") from None
        remember(self._key or self._client.api_key)

    def stream(self) -> OpenAIStream:
        if self._client is None:
            raise SttError(f"{self.name}: start() was not called (or {KEY_ENV} is missing)")
        return OpenAIStream(self._client, self._session, self._finalize_timeout_s)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


class OpenAIStream:
    """One utterance in one transcription session (``SttStream``)."""

    def __init__(
        self, client: openai.AsyncOpenAI, session: dict[str, Any], finalize_timeout_s: float
    ) -> None:
        self._client, self._session = client, session
        self._finalize_timeout_s = finalize_timeout_s
        self._stack = AsyncExitStack()
        self._conn: Any = None
        self._pushed = 0  # samples at 16 kHz
        self._text: dict[str, str] = {}  # item id → text of its deltas so far
        self._committed = False
        self._deadline = float("inf")
        self._waiting: anyio.CancelScope | None = None
        self._finalized = self._ended = False

    async def __aenter__(self) -> Self:
        try:
            manager = self._client.realtime.connect(extra_query={"intent": "transcription"})
            self._conn = await self._stack.enter_async_context(manager)
            await self._conn.session.update(session=self._session)
        except Exception as exc:
            await self._stack.aclose()
            raise _mapped(exc) from None
        return self

    async def push(self, samples: Samples) -> None:
        if self._finalized:
            raise RuntimeError("push() after finalize()")
        self._pushed += len(samples)
        pcm = resample(samples, SAMPLE_RATE, SESSION_RATE).astype("<i2", copy=False).tobytes()
        try:
            await self._conn.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())
        except Exception as exc:
            raise _mapped(exc) from None

    async def speech_paused(self, paused: bool) -> None:
        """Ignored: the commit at ``finalize()`` is what settles."""

    async def finalize(self) -> None:
        if self._finalized:
            return
        self._finalized = True
        if self._pushed < MIN_COMMIT_S * SAMPLE_RATE:
            self._ended = True  # the API refuses so short a buffer: nothing was said
            if self._waiting is not None:
                self._waiting.cancel()
            return
        self._deadline = anyio.current_time() + self._finalize_timeout_s
        if self._waiting is not None:
            self._waiting.deadline = self._deadline
        self._committed = True  # before sending: the answer may be read before we resume
        try:
            await self._conn.input_audio_buffer.commit()
        except Exception as exc:
            raise _mapped(exc) from None

    async def transcripts(self) -> AsyncIterator[Transcript]:
        while not self._ended:
            event = await self._receive()
            if event is None:
                return
            transcript = self._read(event)
            if transcript is not None:
                yield transcript

    def _read(self, event: Any) -> Transcript | None:
        if not isinstance(event, dict):
            raise SttError(f"{NAME}: malformed event (not a JSON object): {quote(event, 80)}")
        kind = event.get("type")
        end_s = self._pushed / SAMPLE_RATE
        if kind == DELTA:
            item, delta = event.get("item_id"), event.get("delta")
            if not isinstance(item, str) or not isinstance(delta, str | None):
                raise SttError(f"{NAME}: malformed {kind}: item_id or delta of the wrong type")
            text = self._text.get(item, "") + (delta or "")
            self._text[item] = text
            return (
                Transcript(text.strip(), False, start_s=0.0, end_s=end_s) if text.strip() else None
            )
        if kind == COMPLETED:
            transcript = event.get("transcript")
            if not isinstance(transcript, str):
                raise SttError(f"{NAME}: malformed {kind}: transcript is not a string")
            text = transcript.strip()
            if self._committed:
                self._ended = True  # the committed utterance is settled (maybe empty)
            return Transcript(text, True, start_s=0.0, end_s=end_s) if text else None
        if kind == FAILED or kind == "error":
            self._raise_error(event)
        return None

    def _raise_error(self, event: dict[str, Any]) -> None:
        error = event.get("error")
        error = error if isinstance(error, dict) else {}
        code, message = error.get("code"), error.get("message") or error.get("type")
        if code == "input_audio_buffer_commit_empty":
            self._ended = True  # too little audio to transcribe: nothing heard
            return
        if (
            code in ("invalid_api_key", "unauthorized")
            or error.get("type") == "authentication_error"
        ):
            raise SttError(f"{NAME}: auth: {quote(message, 200)}")
        raise SttError(
            f"{NAME}: the service reported an error ({quote(code, 60)}): {quote(message, 200)}",
            retryable=code in RETRYABLE_CODES,
        )

    async def _receive(self) -> Any:
        """The next event as parsed JSON (None: the session ended normally)."""
        with anyio.CancelScope(deadline=self._deadline) as scope:
            self._waiting = scope
            try:
                raw = await self._conn.recv_bytes()
            except Exception as exc:
                if closed_normally(exc):
                    return None
                raise _mapped(exc) from None
            finally:
                self._waiting = None
            try:
                return json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise SttError(f"{NAME}: malformed event (not JSON): {quote(raw, 80)}") from exc
        if self._ended:
            return None  # finalize() found nothing to commit
        raise SttError(
            f"{NAME}: timeout: no transcript within {self._finalize_timeout_s:g} s of the "
            "commit (the service stalled)",
            retryable=True,
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await self._stack.aclose()  # closing a dropped socket has nothing to say


def _mapped(exc: BaseException) -> SttError:
    if isinstance(exc, openai.OpenAIError | openai.APIError) and transport_error(NAME, exc) is None:
        cause = exc.__cause__ or exc.__context__
        error = transport_error(NAME, cause) if cause is not None else None
        return error or SttError(f"{NAME}: {quote(str(exc), 200)}")
    return socket_error(NAME, exc)
