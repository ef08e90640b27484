"""A fake Deepgram live transcription API (``/v1/listen`` WebSocket) on loopback.

The ``deepgram-sdk`` talks to it unchanged (``DeepgramClientEnvironment`` with
``production = ws://127.0.0.1:PORT``). The upgrade is checked as the real
service does: ``Authorization: Token KEY`` (401 ``INVALID_AUTH`` otherwise), a
``model``, and — since only raw audio is understood here — ``encoding=linear16``
with ``sample_rate`` and ``channels=1`` (400 otherwise). A scripted
``http_error`` refuses the upgrade with its status and ``retry-after``.

Then, per ``TranscriptScript`` (``transcript_script``): binary frames are
little-endian int16 audio; every ``interim_ms`` of audio received (samples
counted, not the clock) an interim ``Results`` (``is_final: false``) carries the
words heard but not yet settled, when ``interim_results=true``; when the audio
passes a scripted final boundary a ``Results`` with ``is_final: true`` settles
those words. ``{"type": "Finalize"}`` waits the script's ``finalize_s`` and
settles every word heard so far in one ``Results`` with ``is_final: true,
speech_final: true, from_finalize: true`` (sent even when empty, as the real
service does), then ``UtteranceEnd`` when ``utterance_end_ms`` was asked.
``{"type": "KeepAlive"}`` is recorded; ``{"type": "CloseStream"}`` sends
``Metadata`` and closes 1000. Word times are seconds from the stream's start;
``punctuated_word`` is sent when ``punctuate`` or ``smart_format`` is on.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket

from .fake_server import pause
from .fake_stt_socket import ScriptedSocket, SttConnection, SttServer
from .transcript_script import ScriptWord, TranscriptScript

LISTEN_PATH = "/v1/listen"
ERROR_CODES = {401: "INVALID_AUTH", 402: "ASR_PAYMENT_REQUIRED", 429: "TOO_MANY_REQUESTS"}


class FakeDeepgram(SttServer):
    vendor = "deepgram"

    def routes(self) -> Sequence[BaseRoute]:
        return [WebSocketRoute(LISTEN_PATH, self._listen)]

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {"DEEPGRAM_API_KEY": self.api_key}

    async def _listen(self, websocket: WebSocket) -> None:
        await self.serve(websocket, _ListenSession)

    def refusal(self, conn: SttConnection, script: TranscriptScript) -> JSONResponse | None:
        if conn.headers.get("authorization") != f"Token {self.api_key}":
            return _error(401, "Invalid credentials.")
        fault = script.fault
        if fault is not None and fault.kind == "http_error":
            headers = {}
            if fault.retry_after is not None:
                headers["retry-after"] = f"{fault.retry_after:g}"
            return _error(fault.status, fault.message, headers)
        query = conn.query
        if not query.get("model"):
            return _error(400, "model is required")
        if query.get("encoding") != "linear16" or not query.get("sample_rate", "").isdigit():
            return _error(400, "this fake understands only encoding=linear16 with a sample_rate")
        if query.get("channels", "1") != "1":
            return _error(400, "this fake understands only channels=1")
        return None


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """Deepgram's error body on a refused upgrade."""
    body = {
        "err_code": ERROR_CODES.get(status, "Bad Request" if status < 500 else "INTERNAL"),
        "err_msg": message,
        "request_id": str(uuid.uuid4()),
    }
    return JSONResponse(body, status_code=status, headers=headers)


class _ListenSession:
    """One accepted socket: audio counted, results sent as the script says."""

    def __init__(self, ws: WebSocket, conn: SttConnection, script: TranscriptScript) -> None:
        self.ws, self.conn, self.script = ws, conn, script
        self.out = ScriptedSocket(ws, conn, script)
        query = conn.query
        self.rate = int(query["sample_rate"])
        self.interim = query.get("interim_results") == "true"
        self.punctuated = "true" in (query.get("punctuate"), query.get("smart_format"))
        self.utterance_end = query.get("utterance_end_ms") is not None
        self.model = query["model"]
        self.request_id = str(uuid.uuid4())
        self.settled = 0  # words already sent in a final
        self.next_interim = script.interim_ms / 1000
        self.last_end = 0.0

    @property
    def audio_s(self) -> float:
        return self.conn.samples / self.rate

    async def run(self) -> None:
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                if not self.out.finished:
                    self.conn.client_closed = True
                return
            data = message.get("bytes")
            if data is not None:
                self.conn.samples += len(data) // 2
                await self._on_audio()
                continue
            await self._on_control(message.get("text") or "")

    async def _on_audio(self) -> None:
        heard = self.script.heard(self.audio_s)
        settled = self.script.settled(heard)
        if settled > self.settled:
            await self._results(settled, is_final=True)
        if self.audio_s >= self.next_interim:
            while self.next_interim <= self.audio_s:
                self.next_interim += self.script.interim_ms / 1000
            if self.interim and heard > self.settled:
                await self._results(heard, is_final=False)

    async def _on_control(self, text: str) -> None:
        try:
            control = json.loads(text)
        except json.JSONDecodeError:
            control = text
        self.conn.controls.append(control)
        kind = control.get("type") if isinstance(control, dict) else None
        if kind == "Finalize":
            if self.script.ignore_finalize:
                return
            await pause(self.script.finalize_s)
            await self._results(self.script.heard(self.audio_s), is_final=True, finalize=True)
            if self.utterance_end:
                await self.out.send(
                    {"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": self.last_end}
                )
        elif kind == "CloseStream":
            await self.out.send(self._metadata())
            await self.out.close(1000)
        elif kind != "KeepAlive":
            await self.out.close(1008, "DATA-0000: could not parse the control message")

    async def _results(self, upto: int, *, is_final: bool, finalize: bool = False) -> None:
        words = self.script.words[self.settled : upto]
        start = words[0].start_s if words else self.last_end
        end = words[-1].end_s if words else self.audio_s
        if is_final:
            self.settled = max(self.settled, upto)
            if words:
                self.last_end = words[-1].end_s
        shown = [self._word(w) for w in words]
        transcript = " ".join(w.get("punctuated_word", w["word"]) for w in shown)
        confidence = min((w.confidence for w in words), default=0.0)
        await self.out.send(
            {
                "type": "Results",
                "channel_index": [0, 1],
                "duration": round(max(0.0, end - start), 3),
                "start": round(start, 3),
                "is_final": is_final,
                "speech_final": finalize,
                "from_finalize": finalize,
                "channel": {
                    "alternatives": [
                        {"transcript": transcript, "confidence": confidence, "words": shown}
                    ]
                },
                "metadata": {
                    "request_id": self.request_id,
                    "model_info": {"name": self.model, "version": "fake", "arch": "fake"},
                    "model_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, self.model)),
                },
            }
        )

    def _word(self, word: ScriptWord) -> dict[str, Any]:
        plain = "".join(c for c in word.text.lower() if c.isalnum() or c == "'")
        shown: dict[str, Any] = {
            "word": plain,
            "start": word.start_s,
            "end": word.end_s,
            "confidence": word.confidence,
        }
        if self.punctuated:
            shown["punctuated_word"] = word.text
        return shown

    def _metadata(self) -> dict[str, Any]:
        return {
            "type": "Metadata",
            "transaction_key": "deprecated",
            "request_id": self.request_id,
            "sha256": "0" * 64,
            "created": "2026-01-01T00:00:00.000Z",
            "duration": round(self.audio_s, 3),
            "channels": 1,
            "models": [str(uuid.uuid5(uuid.NAMESPACE_URL, self.model))],
        }
