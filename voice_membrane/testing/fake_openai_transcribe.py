"""A fake OpenAI Realtime transcription session (``/v1/realtime?intent=transcription``)
on loopback; the ``openai`` SDK's ``client.realtime.connect`` talks to it unchanged.

The upgrade needs ``Authorization: Bearer KEY`` (401 with OpenAI's error JSON
otherwise); a scripted ``http_error`` refuses it with its status and
``retry-after``. Then, as the GA Realtime API:

- the server sends ``session.created``; ``session.update`` with ``session.type
  "transcription"`` is checked (``audio.input.format`` must be ``audio/pcm`` at
  24000 Hz, ``audio.input.transcription.model`` given) and answered with
  ``session.updated``, else an ``error`` event (``invalid_request_error``);
- ``input_audio_buffer.append`` (base64 pcm16 at 24 kHz) adds to the buffer.
  Models that transcribe while audio arrives (``gpt-realtime-whisper``,
  ``gpt-live-transcribe``) send ``conversation.item.input_audio_transcription.delta``
  every ``interim_ms`` of audio received (samples counted) with the words heard
  since; the others send none before the commit;
- ``input_audio_buffer.commit``: under 100 ms of audio is the real API's
  ``input_audio_buffer_commit_empty`` error; else ``input_audio_buffer.committed``
  (``item_id``), the script's ``finalize_s``, the remaining words as deltas, and
  ``conversation.item.input_audio_transcription.completed`` with the whole
  ``transcript`` and a ``duration`` usage. The next buffer is a new item.

Faults as in ``transcript_script``; ``malformed`` sends a frame that is not JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Sequence
from typing import Any

from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket

from .fake_server import pause
from .fake_stt_socket import ScriptedSocket, SttConnection, SttServer
from .transcript_script import TranscriptScript

RATE = 24000
STREAMING_MODELS = ("gpt-realtime-whisper", "gpt-live-transcribe")
MIN_COMMIT_MS = 100


class FakeOpenAITranscribe(SttServer):
    vendor = "openai-transcribe"

    def routes(self) -> Sequence[BaseRoute]:
        return [WebSocketRoute("/v1/realtime", self._realtime)]

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": self.api_key}

    async def _realtime(self, websocket: WebSocket) -> None:
        await self.serve(websocket, _TranscriptionSession)

    def refusal(self, conn: SttConnection, script: TranscriptScript) -> JSONResponse | None:
        if conn.headers.get("authorization") != f"Bearer {self.api_key}":
            return _http_error(401, "Incorrect API key provided.", "invalid_api_key")
        fault = script.fault
        if fault is not None and fault.kind == "http_error":
            headers = {} if fault.retry_after is None else {"retry-after": f"{fault.retry_after:g}"}
            return _http_error(fault.status, fault.message, None, headers)
        return None


def _http_error(
    status: int, message: str, code: str | None, headers: dict[str, str] | None = None
) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 429:
        kind = "rate_limit_exceeded"
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


class _TranscriptionSession:
    def __init__(self, ws: WebSocket, conn: SttConnection, script: TranscriptScript) -> None:
        self.ws, self.conn, self.script = ws, conn, script
        self.out = ScriptedSocket(ws, conn, script)
        self.session: dict[str, Any] = {
            "type": "transcription",
            "id": f"sess_{uuid.uuid4().hex[:20]}",
            "object": "realtime.transcription_session",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": RATE},
                    "transcription": None,
                    "noise_reduction": None,
                    "turn_detection": {"type": "server_vad", "threshold": 0.5},
                }
            },
        }
        self.item = self._new_item()
        self.buffer_samples = 0  # in the current (uncommitted) buffer
        self.offset_samples = 0  # committed before it: word times run on
        self.told = 0  # words of the script sent as deltas
        self.item_first = 0  # the first word of the current item
        self.next_delta = script.interim_ms / 1000

    @staticmethod
    def _new_item() -> str:
        return f"item_{uuid.uuid4().hex[:20]}"

    @property
    def audio_s(self) -> float:
        return (self.offset_samples + self.buffer_samples) / RATE

    @property
    def streaming(self) -> bool:
        transcription = self.session["audio"]["input"].get("transcription") or {}
        return transcription.get("model") in STREAMING_MODELS

    async def run(self) -> None:
        await self._event("session.created", session=self.session)
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                if not self.out.finished:
                    self.conn.client_closed = True
                return
            raw = message.get("text") or (message.get("bytes") or b"").decode(errors="replace")
            try:
                event = json.loads(raw)
            except json.JSONDecodeError:
                await self._error("invalid_request_error", "invalid_json", "Invalid JSON.")
                continue
            await self._on_event(event)

    async def _on_event(self, event: Any) -> None:
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "input_audio_buffer.append":
            await self._append(event.get("audio"))
            return
        self.conn.controls.append(event)
        if kind == "session.update":
            await self._update(event.get("session"))
        elif kind == "input_audio_buffer.commit":
            await self._commit()
        elif kind == "input_audio_buffer.clear":
            self.buffer_samples = 0
            await self._event("input_audio_buffer.cleared")
        else:
            await self._error("invalid_request_error", "unknown_event", f"Unknown event {kind!r}.")

    async def _update(self, session: Any) -> None:
        audio_in = ((session or {}).get("audio") or {}).get("input") or {}
        fmt, transcription = audio_in.get("format") or {}, audio_in.get("transcription") or {}
        if (session or {}).get("type") != "transcription":
            await self._error("invalid_request_error", "invalid_value", "session.type")
        elif fmt.get("type") != "audio/pcm" or fmt.get("rate") != RATE:
            await self._error(
                "invalid_request_error",
                "invalid_value",
                "this fake takes only audio/pcm at 24000 Hz",
                param="session.audio.input.format",
            )
        elif not transcription.get("model"):
            await self._error("invalid_request_error", "missing_required_parameter", "model")
        else:
            self.session["audio"]["input"].update(audio_in)
            await self._event("session.updated", session=self.session)

    async def _append(self, audio: Any) -> None:
        try:
            data = base64.b64decode(audio, validate=True) if isinstance(audio, str) else None
        except binascii.Error:
            data = None
        if data is None:
            await self._error("invalid_request_error", "invalid_value", "audio must be base64")
            return
        self.buffer_samples += len(data) // 2
        self.conn.samples += len(data) // 2
        if self.streaming and self.audio_s >= self.next_delta:
            while self.next_delta <= self.audio_s:
                self.next_delta += self.script.interim_ms / 1000
            await self._deltas(self.script.heard(self.audio_s))

    async def _commit(self) -> None:
        buffered_ms = self.buffer_samples * 1000 / RATE
        if buffered_ms < MIN_COMMIT_MS:
            await self._error(
                "invalid_request_error",
                "input_audio_buffer_commit_empty",
                "Error committing input audio buffer: buffer too small. Expected at least "
                f"100ms of audio, but buffer only has {buffered_ms:.2f}ms of audio.",
            )
            return
        item, first = self.item, self.item_first
        await self._event("input_audio_buffer.committed", item_id=item, previous_item_id=None)
        self.offset_samples += self.buffer_samples
        self.buffer_samples = 0
        self.item = self._new_item()
        self.item_first = self.script.heard(self.audio_s)
        if self.script.ignore_finalize:
            return
        await pause(self.script.finalize_s)
        heard = self.script.heard(self.audio_s)
        await self._deltas(heard, item)
        transcript = " ".join(w.text for w in self.script.words[first:heard])
        await self._event(
            "conversation.item.input_audio_transcription.completed",
            item_id=item,
            content_index=0,
            transcript=transcript,
            usage={"type": "duration", "seconds": round(buffered_ms / 1000, 3)},
        )

    async def _deltas(self, heard: int, item: str | None = None) -> None:
        if heard <= self.told:
            return
        words = self.script.words[self.told : heard]
        delta = "".join(
            ("" if i == 0 and self.told == 0 else " ") + w.text for i, w in enumerate(words)
        )
        self.told = heard
        await self._event(
            "conversation.item.input_audio_transcription.delta",
            item_id=item or self.item,
            content_index=0,
            delta=delta,
        )

    async def _event(self, kind: str, **fields: Any) -> None:
        await self.out.send({"type": kind, "event_id": f"event_{uuid.uuid4().hex[:20]}", **fields})

    async def _error(self, kind: str, code: str, message: str, param: str | None = None) -> None:
        error = {"type": kind, "code": code, "message": message, "param": param, "event_id": None}
        await self._event("error", error=error)
