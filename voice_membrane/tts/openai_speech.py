"""OpenAI speech: ``POST {base}/audio/speech`` through the ``openai`` SDK, one
request per piece, streamed as raw 24 kHz 16-bit mono PCM.

The service keeps no context between requests (no ``previous_text``), so each
piece is its own request; ``max_in_flight`` of them run at once (``PieceStream``
keeps the audio in text order), so the next piece's time to first byte is
spent while the previous one plays. A piece over the API's 4096 characters is
split at a sentence end (else a space) into several requests, spoken in order.

The body arrives in network chunks that may cut a sample in two: the odd byte
is carried to the next chunk (``Pcm16Carry``). A body that ends on an odd byte
ends on half a sample: the byte is dropped without an error, since it is
inaudible (one sample is 42 µs) and the audio before it is whole.

Errors (the SDK's retries are off; ``retry_before_output`` decides): 401/403
names the key's variable; an unknown voice or model names it; 429, 5xx and
connection errors before a request's first audio are retried with the
pipeline's policy (the service's ``retry-after`` first), then reported with the
number of attempts; a service silent for ``read_timeout_s`` (the HTTP client's
read timeout: no bytes for that long) is an error that is not retried, since in
a live turn every retry would add that silence again. An interruption closes
the response at once (the connection is dropped, not drained).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator
from contextlib import aclosing
from functools import partial
from typing import Any

import httpx2
import openai

from ..infra.redact import quote, remember
from ..infra.surrogates import unspeakable_to_space
from ..vendors.credentials import api_key, check_base_url, key_variable
from ..vendors.errors import ProviderError
from ..vendors.openai_client import async_client, provider_error
from ..vendors.retry import RetryPolicy
from ..vocab.audio import AudioChunk
from .base import TtsError
from .options import TtsOptions
from .pcm_carry import Pcm16Carry
from .piece_stream import PieceEngine
from .retrying import retry_before_output

RATE = 24000  # response_format "pcm": 24 kHz, 16-bit signed little-endian, mono
MAX_INPUT = 4096  # characters per request (the API refuses more)
DEFAULT_MODEL = "gpt-4o-mini-tts"
# Models that refuse ``instructions`` (their dated snapshots share the prefix).
NO_INSTRUCTIONS = ("tts-1",)
_SENTENCE_END = re.compile("[.!?\u2026][\"')\\]\u201d\u2019]*\\s+")  # closing quotes too
_SPACE = re.compile(r"\s+")

_log = logging.getLogger("voice_membrane.tts")


class OpenAISpeechEngine(PieceEngine):
    """``openai:VOICE``: a built-in voice (``alloy``, ``coral``, ``marin``…) or a
    custom voice id (``voice_…``). Options from ``[tts]`` (``TtsOptions``):
    ``model``, ``instructions`` (not for ``tts-1``/``tts-1-hd``), ``speed``,
    ``base_url``, ``api_key_env``, ``max_retries``, ``read_timeout_s``,
    ``max_in_flight``. ``ValueError`` (one line) for options that cannot work.
    """

    local = False
    billed = True
    sample_rate = RATE
    max_input = MAX_INPUT  # characters per request

    def __init__(self, voice: str, options: TtsOptions | None = None) -> None:
        self.voice = voice.strip()
        self.name = f"openai:{self.voice}"
        self.options = options if options is not None else TtsOptions(spec=self.name)
        self.model = self.options.model or DEFAULT_MODEL
        self.max_in_flight = self.options.max_in_flight
        self.policy = RetryPolicy(max_retries=self.options.max_retries)
        self._where = f"tts {quote(self.name)}"
        if not self.voice:
            raise ValueError(f"{self._where}: name a voice, e.g. openai:alloy")
        if self.options.instructions and self.model.startswith(NO_INSTRUCTIONS):
            raise ValueError(
                f"{self._where}: tts.instructions is not supported by {self.model}"
                f" (use {DEFAULT_MODEL}, or remove instructions)"
            )
        rate = self.options.output_format
        if rate is not None and rate != "pcm_24000":
            raise ValueError(
                f"{self._where}: tts.output_format {rate} is an ElevenLabs format;"
                " OpenAI speech is 24 kHz PCM (remove output_format)"
            )
        self._client: openai.AsyncOpenAI | None = None

    def check_credentials(self) -> str | None:
        """The key to use (None: the SDK's ``OPENAI_API_KEY``, checked); ``ValueError``
        (one line, no secret) for a missing or unusable key or base URL."""
        key = api_key("openai", self._where, self.options.api_key_env, section="tts")
        check_base_url("openai", self._where, self.options.base_url, section="tts")
        return key

    async def start(self) -> None:
        """Check the key and base URL and make the client; no request is sent
        (the API has no cheap voice check: an unknown voice is reported by the
        first request)."""
        if self._client is not None:
            return
        try:
            key = self.check_credentials()
            remember(key)
            timeout = httpx2.Timeout(self.options.read_timeout_s)
            self._client = async_client(key, self.options.base_url, timeout)
        except ValueError as exc:
            raise TtsError(str(exc)) from None
        except ProviderError as exc:
            raise TtsError(f"{self._where}: {exc.detail}") from None

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def synthesize(
        self, text: str, previous_text: str = ""
    ) -> AsyncGenerator[AudioChunk, None]:
        """The audio of ``text`` (``previous_text`` is not used: the API takes none)."""
        client = self._client
        if client is None:
            raise TtsError(f"{self._where}: call start() first")
        for part in split_input(unspeakable_to_space(text), self.max_input):
            if not part.strip():
                continue
            attempt = partial(self._request, client, part)
            retried = 0

            def count(error: TtsError, delay_s: float) -> None:
                nonlocal retried
                retried += 1
                _log.warning("%s; retrying in %.2f s", error, delay_s)

            try:
                async with aclosing(retry_before_output(attempt, self.policy, count)) as chunks:
                    async for chunk in chunks:
                        yield chunk
            except TtsError as error:
                if retried:
                    raise TtsError(
                        f"{error} (after {retried + 1} attempts)",
                        retryable=error.retryable,
                        retry_after_s=error.retry_after_s,
                        kind=error.kind,
                    ) from None
                raise

    def body(self, text: str) -> dict[str, Any]:
        """The request's JSON fields for ``text``."""
        voice: str | dict[str, str] = self.voice
        if self.voice.startswith("voice_"):
            voice = {"id": self.voice}  # a custom voice goes by id
        body: dict[str, Any] = {
            "model": self.model,
            "voice": voice,
            "input": text,
            "response_format": "pcm",
        }
        if self.options.instructions:
            body["instructions"] = self.options.instructions
        if self.options.speed is not None:
            body["speed"] = self.options.speed
        return body

    async def _request(
        self, client: openai.AsyncOpenAI, text: str
    ) -> AsyncGenerator[AudioChunk, None]:
        carry = Pcm16Carry()
        speech = client.audio.speech.with_streaming_response
        try:
            # Leaving the block closes the response, also when cancelled (httpcore
            # shields that close): an unfinished body's connection is dropped, not
            # drained, so the service stops generating at once.
            async with speech.create(**self.body(text)) as response:
                async for data in response.iter_bytes():
                    samples = carry.feed(data)
                    if len(samples):
                        yield AudioChunk(samples, RATE)
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise self._error(exc, str(client.base_url)) from exc
        # carry.leftover may be 1 here: half a sample, dropped (module docstring).

    def _error(self, exc: BaseException, url: str) -> TtsError:
        error = provider_error(exc).at(url)
        where, status = self._where, error.status
        said = f" (HTTP {status})" if status is not None else ""
        if error.kind == "auth":
            variable = key_variable("openai", self.options.api_key_env, section="tts")
            # A 401's message quotes part of the key ("sk-ab***cd"): not repeated.
            why = f" ({error.detail})" if status == 403 else ""
            return TtsError(
                f"{where}: the service refused the key{said}: set {variable} to a valid"
                f" OpenAI API key{why}",
                kind="auth",
            )
        if error.kind == "timeout":
            return TtsError(
                f"{where}: no audio from the service for {self.options.read_timeout_s:g} s"
                " (tts.read_timeout_s)",
                kind="timeout",
            )
        param = _error_param(exc)
        if status == 400 and (param == "voice" or (param is None and "voice" in error.detail)):
            return TtsError(
                f"{where}: unknown voice {quote(self.voice)}{said}: {error.detail}",
                kind="bad_request",
            )
        if status == 404 and (param in (None, "model") and "model" in error.detail):
            return TtsError(
                f"{where}: unknown model {quote(self.model)}{said}: {error.detail}",
                kind="bad_request",
            )
        return TtsError(
            f"{where}: {error.kind}{said}: {error.detail}",
            retryable=error.retryable,
            retry_after_s=error.retry_after_s,
            kind=error.kind,
        )


def split_input(text: str, limit: int = MAX_INPUT) -> list[str]:
    """``text`` in consecutive parts of at most ``limit`` characters (joined they
    are ``text``), each cut after a sentence end when one fits, else after a
    space, else at the limit."""
    parts: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = 0
        for match in _SENTENCE_END.finditer(window):
            cut = match.end()
        if not cut:
            for match in _SPACE.finditer(window):
                cut = match.end()
        if not cut:
            cut = limit
        parts.append(rest[:cut])
        rest = rest[cut:]
    parts.append(rest)
    return parts


def _error_param(exc: BaseException) -> str | None:
    """The ``param`` an OpenAI error body names (``{"error": {"param": …}}``)."""
    body = exc.body if isinstance(exc, openai.APIError) else None
    inner = body.get("error", body) if isinstance(body, dict) else None
    param = inner.get("param") if isinstance(inner, dict) else None
    return param if isinstance(param, str) else None
