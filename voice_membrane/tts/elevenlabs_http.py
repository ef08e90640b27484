"""ElevenLabs over HTTP streaming (``POST /v1/text-to-speech/{voice_id}/stream``).

One request per piece through the ``elevenlabs`` SDK's async client; the turn's
earlier text goes along as ``previous_text`` so the voice keeps its prosody
across pieces. Up to ``max_in_flight`` requests run at once (the next piece is
synthesized while the previous one plays; ``PieceStream`` keeps the audio in
text order). 429/5xx and refused connections before the first audio are
retried with the pipeline's policy; no bytes for ``read_timeout_s`` is an
error, not a hang; an interruption closes the response at once. Also the
socket engine's fallback for a turn whose socket cannot be opened.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio
import httpx

from ..vocab.audio import AudioChunk
from .base import TtsError
from .elevenlabs_common import (
    NO_SDK_RETRIES,
    AudioDecoder,
    ElevenLabsConfig,
    lookup_voice,
    make_client,
)
from .options import TtsOptions
from .piece_stream import PieceEngine
from .retrying import retry_before_output

if TYPE_CHECKING:
    from elevenlabs.client import AsyncElevenLabs

# Bytes per chunk the SDK hands over: 1 KiB is 32 ms of 16 kHz audio, small
# enough not to hold back the first audio.
CHUNK_BYTES = 1024


class ElevenLabsHttpEngine(PieceEngine):
    local = False
    billed = True

    def __init__(
        self,
        voice_id: str,
        options: TtsOptions | None = None,
        sink_rate: int | None = None,
        *,
        config: ElevenLabsConfig | None = None,
    ) -> None:
        options = options or TtsOptions(spec=f"elevenlabs-http:{voice_id}")
        self.config = config or ElevenLabsConfig.resolve(voice_id, options, sink_rate)
        self.name = f"elevenlabs-http:{voice_id}"
        self.sample_rate = self.config.sample_rate
        self.max_in_flight = self.config.options.max_in_flight
        self.voice_name: str | None = None
        self._client: AsyncElevenLabs | None = None
        self._http: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        return f"ElevenLabsHttpEngine({self.config!r})"

    async def start(self) -> None:
        client = self._ensure_client()
        self.voice_name = await lookup_voice(client, self.config)

    async def aclose(self) -> None:
        http, self._http, self._client = self._http, None, None
        if http is not None:
            with anyio.CancelScope(shield=True):
                await http.aclose()

    def _ensure_client(self) -> AsyncElevenLabs:
        if self._client is None:
            self._client, self._http = make_client(self.config)
        return self._client

    async def synthesize(
        self, text: str, previous_text: str = ""
    ) -> AsyncGenerator[AudioChunk, None]:
        attempts = retry_before_output(
            lambda: self._request(text, previous_text), self.config.policy
        )
        async with aclosing(attempts) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _request(self, text: str, previous_text: str) -> AsyncGenerator[AudioChunk, None]:
        config = self.config
        client = self._ensure_client()
        kwargs: dict[str, Any] = {
            "text": text,
            "model_id": config.model,
            "output_format": config.output_format,
            "request_options": {**NO_SDK_RETRIES, "chunk_size": CHUNK_BYTES},
        }
        if previous_text:
            kwargs["previous_text"] = previous_text
        if config.options.optimize_streaming_latency is not None:
            kwargs["optimize_streaming_latency"] = config.options.optimize_streaming_latency
        settings = config.voice_settings()
        if settings is not None:
            from elevenlabs.types import VoiceSettings

            kwargs["voice_settings"] = VoiceSettings(**settings)
        decoder = AudioDecoder(config.output_format)
        timeout = config.options.read_timeout_s
        with config.sdk_errors("speech request"):
            async with aclosing(client.text_to_speech.stream(config.voice_id, **kwargs)) as body:
                while True:
                    # No bytes for read_timeout_s: an error, never a hang.
                    try:
                        with anyio.fail_after(timeout):
                            data = await body.__anext__()
                    except StopAsyncIteration:
                        break
                    except TimeoutError:
                        # Not retried: each retry would add that silence again.
                        raise TtsError(
                            f"ElevenLabs sent no audio for {timeout:g} s (tts.read_timeout_s)"
                        ) from None
                    samples = decoder.feed(data)
                    if len(samples):
                        yield AudioChunk(samples, self.sample_rate)
        # An odd byte left at the end is half a sample: nothing to play, dropped
        # (the audio before it is whole; ending the turn's speech would lose more).
