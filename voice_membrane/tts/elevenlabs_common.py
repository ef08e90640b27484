"""What the ElevenLabs engines share: formats, URLs, the key, errors, voice lookup.

``ElevenLabsConfig.resolve`` checks everything a pipeline file or the environment
gives (key, base URL, format) before anything starts, with one ``ValueError``
line each; ``lookup_voice`` asks the service once, at ``start()``, so a bad key or
an unknown voice is one clear ``TtsError`` before the first turn. Errors name the
variable to set or the voice, never the key (it is ``remember``-ed for
redaction).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote as url_quote
from urllib.parse import urlsplit, urlunsplit

import httpx

from ..infra.redact import quote, redact, remember
from ..vendors.credentials import api_key, check_base_url
from ..vendors.errors import retry_after_seconds, status_kind
from ..vendors.retry import RetryPolicy
from ..vendors.tls import shared_ssl_context
from ..vocab.audio import Samples, pcm16_from_ulaw
from .base import TtsError
from .options import ELEVENLABS_FORMATS, TtsOptions
from .pcm_carry import Pcm16Carry
from .retrying import retry_call

if TYPE_CHECKING:
    from elevenlabs.client import AsyncElevenLabs

DEFAULT_BASE_URL = "https://api.elevenlabs.io"
DEFAULT_MODEL = "eleven_flash_v2_5"
KEY_VARIABLE = "ELEVENLABS_API_KEY"
# The formats the service speaks, by rate: μ-law at 8 kHz for a phone call's
# sink (what the call carries: nothing to resample), PCM at the others.
PCM_RATES = {16000: "pcm_16000", 22050: "pcm_22050", 24000: "pcm_24000", 44100: "pcm_44100"}
SINK_FORMATS = {8000: "ulaw_8000", **PCM_RATES}
CONNECT_TIMEOUT_S = 10.0


def format_rate(output_format: str) -> int:
    """The sample rate of an ElevenLabs output format (``pcm_24000`` → 24000)."""
    if output_format not in ELEVENLABS_FORMATS:
        raise ValueError(f"unsupported ElevenLabs output format {quote(output_format)}")
    return int(output_format.rpartition("_")[2])


def format_for_sink(sink_rate: int | None) -> str:
    """The format the sink plays without resampling (μ-law for an 8 kHz sink: a
    phone call), else the nearest of 24 kHz and 22.05 kHz PCM (what voices are
    natively made at)."""
    if sink_rate in SINK_FORMATS:
        return SINK_FORMATS[sink_rate]
    if sink_rate is None:
        return "pcm_24000"
    return "pcm_24000" if abs(sink_rate - 24000) <= abs(sink_rate - 22050) else "pcm_22050"


class AudioDecoder:
    """Raw audio bytes of one response or socket as samples: μ-law decoded, or
    16-bit PCM with a sample split across two chunks carried over (``Pcm16Carry``)."""

    def __init__(self, output_format: str) -> None:
        self.ulaw = output_format.startswith("ulaw")
        self._pcm = Pcm16Carry()

    def feed(self, data: bytes) -> Samples:
        if self.ulaw:
            return pcm16_from_ulaw(data)
        return self._pcm.feed(data)


@dataclass(frozen=True, slots=True)
class ElevenLabsConfig:
    """One voice's settings, checked: where to connect, with which key, in which format."""

    voice_id: str
    options: TtsOptions
    output_format: str
    sample_rate: int
    base_url: str  # http(s)://host[:port][/prefix], no trailing slash
    key: str = ""  # never shown: repr=False below
    key_variable: str = KEY_VARIABLE

    def __repr__(self) -> str:
        return (
            f"ElevenLabsConfig(voice_id={self.voice_id!r}, output_format={self.output_format!r}, "
            f"base_url={redact(self.base_url)!r})"
        )

    @classmethod
    def resolve(
        cls, voice_id: str, options: TtsOptions, sink_rate: int | None = None
    ) -> ElevenLabsConfig:
        """``ValueError`` (one line) for an empty voice, a missing or unusable key or
        an unusable base URL."""
        where = f"tts {quote(options.spec)}"
        if not voice_id.strip() or voice_id != voice_id.strip():
            raise ValueError(f"{where}: give a voice id (elevenlabs:VOICE_ID)")
        key = api_key("elevenlabs", where, options.api_key_env, section="tts")
        if key is None:
            key = os.environ[KEY_VARIABLE]
        remember(key)
        check_base_url("elevenlabs", where, options.base_url, section="tts")
        base = options.base_url or os.environ.get("ELEVENLABS_BASE_URL") or DEFAULT_BASE_URL
        output_format = options.output_format or format_for_sink(sink_rate)
        return cls(
            voice_id=voice_id,
            options=options,
            output_format=output_format,
            sample_rate=format_rate(output_format),
            base_url=base.rstrip("/"),
            key=key,
            key_variable=options.api_key_env or KEY_VARIABLE,
        )

    @property
    def model(self) -> str:
        return self.options.model or DEFAULT_MODEL

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy(max_retries=self.options.max_retries)

    def socket_url(self, *, multi: bool) -> str:
        """The stream-input (or multi-stream-input) URL: the base URL's scheme as ws(s)."""
        parts = urlsplit(self.base_url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        endpoint = "multi-stream-input" if multi else "stream-input"
        query: dict[str, str] = {
            "model_id": self.model,
            "output_format": self.output_format,
            "inactivity_timeout": str(self.options.inactivity_timeout_s),
            # Timing data with every audio chunk, not ahead of it: each chunk can
            # be attributed to its piece as it arrives.
            "sync_alignment": "true",
        }
        if self.options.auto_mode:
            query["auto_mode"] = "true"
        path = f"{parts.path}/v1/text-to-speech/{url_quote(self.voice_id, safe='')}/{endpoint}"
        encoded = "&".join(f"{k}={url_quote(v, safe='')}" for k, v in query.items())
        return urlunsplit((scheme, parts.netloc, path, encoded, ""))

    def voice_settings(self) -> dict[str, Any] | None:
        settings = self.options.voice_settings
        if settings is None:
            return None
        chosen = settings.model_dump(exclude_none=True)
        return chosen or None

    # ------------------------------------------------------------ errors

    def auth_error(self, status: int | str) -> TtsError:
        return TtsError(
            f"ElevenLabs refused the API key ({status}): set {self.key_variable} to a valid key",
            kind="auth",
        )

    def voice_error(self) -> TtsError:
        return TtsError(
            f"ElevenLabs has no voice {quote(self.voice_id)} for this key: check the voice id "
            "(tts elevenlabs:VOICE_ID)",
            kind="bad_request",
        )

    def status_error(
        self, status: int, headers: Mapping[str, str] | None, body: Any, doing: str
    ) -> TtsError:
        """The ``TtsError`` for an HTTP status (an API response or a refused handshake)."""
        code, message = _detail(body)
        if status in (401, 403) or code in ("invalid_api_key", "missing_api_key"):
            return self.auth_error(f"HTTP {status}")
        if status == 404 or code in ("voice_not_found", "invalid_uid"):
            return self.voice_error()
        retryable = status == 429 or status >= 500
        said = f": {message}" if message else ""
        return TtsError(
            redact(f"ElevenLabs {doing} failed with HTTP {status}{said}")[:300],
            retryable=retryable,
            retry_after_s=_retry_after(headers) if retryable else None,
            kind=status_kind(status),
        )

    @contextmanager
    def sdk_errors(self, doing: str) -> Iterator[None]:
        """The SDK's API and transport errors as one clear ``TtsError``."""
        from elevenlabs.core.api_error import ApiError

        try:
            yield
        except ApiError as exc:
            raise self.status_error(exc.status_code or 0, exc.headers, exc.body, doing) from None
        except httpx.HTTPError as exc:
            raise self.connection_error(exc, doing) from None

    def connection_error(self, exc: BaseException, doing: str) -> TtsError:
        detail = redact(str(exc) or type(exc).__name__)[:200]
        return TtsError(
            f"ElevenLabs {doing}: cannot reach {redact(self.base_url)} ({detail})", retryable=True
        )


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    # The SDK's headers are a plain dict, a refused handshake's are raw items.
    lowered = {k.lower(): v for k, v in headers.items()} if headers else None
    return retry_after_seconds(lowered)


def _detail(body: Any) -> tuple[str, str]:
    """(status code word, message) of ElevenLabs' error JSON ``{"detail": {...}}``."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, dict):
        return str(detail.get("status") or ""), str(detail.get("message") or "")
    if isinstance(detail, str):
        return "", detail
    return "", ""


# ---------------------------------------------------------------- the SDK client


def make_client(config: ElevenLabsConfig) -> tuple[AsyncElevenLabs, httpx.AsyncClient]:
    """The SDK's async client over our own httpx client (closed by the engine's
    ``aclose``); a read timeout guards every request."""
    from elevenlabs.client import AsyncElevenLabs

    timeout = httpx.Timeout(config.options.read_timeout_s, connect=CONNECT_TIMEOUT_S)
    http = httpx.AsyncClient(timeout=timeout, follow_redirects=True, verify=shared_ssl_context())
    client = AsyncElevenLabs(
        base_url=config.base_url,
        api_key=config.key,
        httpx_client=http,
        timeout=config.options.read_timeout_s,
    )
    return client, http


# The SDK retries requests (not streams) by itself: one policy decides here.
NO_SDK_RETRIES: dict[str, Any] = {"max_retries": 0}


async def lookup_voice(client: AsyncElevenLabs, config: ElevenLabsConfig) -> str:
    """The voice's name; one clear ``TtsError`` for a bad key or an unknown voice,
    429/5xx and connection errors retried with the pipeline's policy."""

    async def attempt() -> str:
        with config.sdk_errors("voice lookup"):
            voice = await client.voices.get(config.voice_id, request_options=NO_SDK_RETRIES)
        return str(getattr(voice, "name", "") or config.voice_id)

    return await retry_call(attempt, config.policy)
