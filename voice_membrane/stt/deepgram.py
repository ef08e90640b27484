"""Deepgram live transcription over its official SDK (``deepgram-sdk``'s async
``listen.v1`` WebSocket): one socket per utterance.

Audio goes out as binary linear16 at 16 kHz; interim results are partials,
``is_final`` results are finals (Deepgram may settle several per utterance),
and ``finalize()`` sends ``{"type": "Finalize"}``: the stream ends when the
result marked ``from_finalize`` arrives. If it does not within
``finalize_timeout_s`` the service has stalled: a retryable ``SttError`` (the
finals read before it stay with the caller). Closing sends ``CloseStream``.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self

import anyio
import httpx

with warnings.catch_warnings():  # the SDK imports websockets.legacy (deprecated)
    warnings.simplefilter("ignore", DeprecationWarning)
    from deepgram import AsyncDeepgramClient
    from deepgram.core.api_error import ApiError
    from deepgram.environment import DeepgramClientEnvironment
    from deepgram.listen.v1 import client as _socket_client

from ..infra.redact import remember
from ..vendors.credentials import key_problem
from ..vendors.tls import shared_ssl_context
from ..vocab.audio import Samples
from ..vocab.transcripts import Transcript
from .base import SttError
from .deepgram_read import NAME, read_message
from .socket_errors import (
    closed_normally,
    handshake_status,
    socket_error,
    status_error,
    transport_error,
)

KEY_ENV = "DEEPGRAM_API_KEY"
SAMPLE_RATE = 16000
# How long closing an utterance's socket waits for the service's side of the
# close: the transcripts are read by then, and a stalled service would
# otherwise hold the session's end for websockets' 10 s, three times over.
CLOSE_TIMEOUT_S = 1.0


def _use_lean_sockets() -> None:
    """The SDK opens each utterance's socket with ``websockets``' defaults and
    takes no say in them: on ``wss://`` a TLS context built per socket (the CA
    bundle: ~20 ms of the event loop, which every other session waits on) and
    permessage-deflate offered for audio that does not compress (2.7 % of
    serve's samples at 50 callers). Its connect function, a global of the
    module ``client.listen.v1.connect`` runs in, is wrapped once to pass the
    process's TLS context and no compression (tests/test_stt_deepgram.py sees
    both on the socket the SDK opens, so an SDK that moves it fails there)."""
    sdk_connect: Any = getattr(_socket_client, "websockets_client_connect")  # noqa: B009 (not exported)
    if getattr(sdk_connect, "lean", False):
        return

    def connect(uri: str, **kwargs: Any) -> Any:
        if uri.startswith("wss:"):
            kwargs.setdefault("ssl", shared_ssl_context())
        kwargs.setdefault("compression", None)
        kwargs.setdefault("close_timeout", CLOSE_TIMEOUT_S)
        return sdk_connect(uri, **kwargs)

    connect.lean = True  # type: ignore[attr-defined]
    setattr(_socket_client, "websockets_client_connect", connect)  # noqa: B010 (not exported)


class DeepgramStt:
    """``deepgram:MODEL``: streaming recognition with interim results."""

    sample_rate = SAMPLE_RATE
    local = False

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        language: str = "en",
        endpointing_ms: int | None = 300,
        utterance_end_ms: int | None = None,
        keywords: Sequence[str] = (),
        smart_format: bool = True,
        finalize_timeout_s: float = 2.0,
    ) -> None:
        self.model, self.name = model, f"{NAME}:{model}"
        self._key = api_key or os.environ.get(KEY_ENV) or ""
        self._base_url = base_url
        self._finalize_timeout_s = finalize_timeout_s
        self._options: dict[str, Any] = {
            "model": model,
            "encoding": "linear16",
            "sample_rate": SAMPLE_RATE,
            "channels": 1,
            "language": language,
            "interim_results": "true",
            "punctuate": "true",
            "smart_format": "true" if smart_format else "false",
            # false: only our Finalize settles; a number: Deepgram also settles on its pauses
            "endpointing": "false" if endpointing_ms is None else endpointing_ms,
            "vad_events": "true",
        }
        if utterance_end_ms is not None:
            self._options["utterance_end_ms"] = utterance_end_ms
        if keywords:  # nova-3 takes key terms; earlier models take keywords
            self._options["keyterm" if model.startswith("nova-3") else "keywords"] = list(keywords)
        self._client: AsyncDeepgramClient | None = None
        self._http: httpx.AsyncClient | None = None

    async def start(self) -> None:
        if not self._key:
            raise SttError(f"{NAME}: no API key: pass api_key or set {KEY_ENV}")
        problem = key_problem(self._key)
        if problem:
            raise SttError(f"{NAME}: the API key {problem}")
        remember(self._key)
        kwargs: dict[str, Any] = {"api_key": self._key}
        if self._base_url is not None:
            kwargs["environment"] = _environment(self._base_url)
        # The SDK's own client would load the CA bundle for every session: ~20 ms
        # of the event loop (every session's audio waits), and no request uses it.
        self._http = httpx.AsyncClient(verify=shared_ssl_context(), timeout=60.0)
        self._client = AsyncDeepgramClient(**kwargs, httpx_client=self._http)
        _use_lean_sockets()

    def stream(self) -> DeepgramStream:
        if self._client is None:
            raise SttError(f"{self.name}: start() was not called")
        return DeepgramStream(self._client, self._options, self._finalize_timeout_s)

    async def aclose(self) -> None:
        self._client = None
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()


def _environment(base_url: str) -> DeepgramClientEnvironment:
    """Every endpoint at ``base_url`` (http(s):// or ws(s)://): a proxy or a fake."""
    rest = base_url.rstrip("/").replace("ws://", "http://", 1).replace("wss://", "https://", 1)
    socket = rest.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
    return DeepgramClientEnvironment(base=rest, production=socket, agent=socket, agent_rest=rest)


class DeepgramStream:
    """One utterance over one socket (``SttStream``)."""

    def __init__(
        self, client: AsyncDeepgramClient, options: dict[str, Any], finalize_timeout_s: float
    ) -> None:
        self._client, self._options = client, options
        self._finalize_timeout_s = finalize_timeout_s
        self._stack = AsyncExitStack()
        self._socket: Any = None
        self._deadline = float("inf")  # for the from_finalize result, once finalize() ran
        self._waiting: anyio.CancelScope | None = None
        self._finalized = self._ended = False

    async def __aenter__(self) -> Self:
        try:
            self._socket = await self._stack.enter_async_context(
                self._client.listen.v1.connect(**self._options)
            )
        except ApiError as exc:  # a refused upgrade; its str() would show our headers
            refused = handshake_status(exc.__context__)
            headers = refused[1] if refused is not None else None
            raise status_error(NAME, exc.status_code or 0, headers) from None
        except Exception as exc:
            error = transport_error(NAME, exc)
            if error is None:
                raise
            raise error from None
        return self

    async def push(self, samples: Samples) -> None:
        if self._finalized:
            raise RuntimeError("push() after finalize()")
        try:
            await self._socket.send_media(samples.astype("<i2", copy=False).tobytes())
        except Exception as exc:
            raise socket_error(NAME, exc) from None

    async def speech_paused(self, paused: bool) -> None:
        """Ignored: the service endpoints by itself and settles on ``Finalize``."""

    async def finalize(self) -> None:
        if self._finalized:
            return
        self._finalized = True
        self._deadline = anyio.current_time() + self._finalize_timeout_s
        if self._waiting is not None:
            self._waiting.deadline = self._deadline
        if self._ended:
            return
        try:
            await self._socket.send_finalize()
        except Exception as exc:
            raise socket_error(NAME, exc) from None

    async def transcripts(self) -> AsyncIterator[Transcript]:
        while not self._ended:
            data = await self._receive()
            if data is None:
                return
            heard = read_message(data)
            if heard is None:
                continue
            if heard.transcript is not None:
                yield heard.transcript
            if heard.from_finalize:
                self._ended = True

    async def _receive(self) -> Any:
        """The next message as parsed JSON (None: the service closed normally)."""
        with anyio.CancelScope(deadline=self._deadline) as scope:
            self._waiting = scope
            try:
                raw = await self._socket.recv()
            except json.JSONDecodeError as exc:
                raise SttError(
                    f"{NAME}: malformed message (not JSON) at character {exc.pos}"
                ) from None
            except Exception as exc:
                if closed_normally(exc):
                    self._ended = True
                    return None
                raise socket_error(NAME, exc) from None
            finally:
                self._waiting = None
            if isinstance(raw, bytes):
                return {}
            return raw if isinstance(raw, dict) else raw.dict()
        raise SttError(
            f"{NAME}: timeout: no final result within {self._finalize_timeout_s:g} s of "
            "Finalize (the service stalled)",
            retryable=True,
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._socket is not None:
            # Already closed or dropped: nothing left to tell it.
            with anyio.move_on_after(0.5, shield=True), contextlib.suppress(Exception):
                await self._socket.send_close_stream()
        with anyio.CancelScope(shield=True):
            try:
                await self._stack.aclose()
            except Exception:
                if exc is None:
                    raise
