"""The floor of the serve load benchmark: a bare client of the two wire
protocols doing a served session's work in the server's place, with none of our
code on its path: N sessions in one client process (``clients``' protocol, a
``BareTarget``'s JSON in the URL's place), each running the load client's turns.

A turn posts the chat request to the fake OpenAI with ``httpx`` (one client for
the process, connections kept alive) and reads its SSE body line by line;
meanwhile (as the pipeline does) it opens the fake ElevenLabs stream-input
socket. It cuts the reply where the pipeline's chunker cuts its first piece (as
the benchmark's ideal counts it), sends that text with ``flush``, the rest when
the reply ends, and reads the audio (base64 decoded) until ``isFinal``. *First
audio*: the first audio message after the request was sent.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
from websockets.asyncio.client import ClientConnection, connect

from .clients import ClientResult, Go, client_main, run_sessions
from .load_client import ClientPlan, TurnRecord, run_turns

KEY = "bench-key"


@dataclass(frozen=True, slots=True)
class BareTarget:
    llm_url: str  # the fake OpenAI's base URL (…/v1)
    tts_url: str  # the fake ElevenLabs' base URL (http://…)
    model: str
    voice: str
    cut_after_deltas: int  # the first piece is complete once this many deltas came
    sample_rate: int


class BareSession:
    def __init__(
        self,
        target: BareTarget,
        plan: ClientPlan,
        http: httpx.AsyncClient,
        result: ClientResult[TurnRecord],
    ) -> None:
        self.target, self.plan, self.http, self.result = target, plan, http, result
        self.history: list[dict[str, str]] = []

    def connected(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()  # (its sockets open with each turn)

    async def run(self, delay: float) -> None:
        await run_turns(self.plan, self.result, self._turn, delay)

    async def _turn(self, number: int, record: TurnRecord) -> float:
        t = self.target
        self.history.append({"role": "user", "content": self.plan.prompt})
        url = (
            t.tts_url.replace("http://", "ws://", 1)
            + f"/v1/text-to-speech/{t.voice}/stream-input"
            + f"?model_id=eleven_flash_v2_5&output_format=pcm_{t.sample_rate}"
        )
        sent = time.perf_counter()
        first: float | None = None
        samples = 0
        reply = ""
        opened = anyio.Event()
        socket: list[ClientConnection] = []

        async def speak() -> None:
            """Open the socket while the LLM request goes out, then read the audio."""
            nonlocal first, samples
            async with connect(url, additional_headers={"xi-api-key": KEY}, compression=None) as ws:
                await ws.send(json.dumps({"text": " "}))
                socket.append(ws)
                opened.set()
                async for message in ws:
                    data = json.loads(message)
                    if data.get("audio"):
                        samples += len(base64.b64decode(data["audio"])) // 2
                        record.frames += 1
                        if first is None:
                            first = time.perf_counter()
                    if data.get("isFinal"):
                        return

        async def send(text: str) -> None:
            await opened.wait()
            await socket[0].send(json.dumps({"text": text + " ", "flush": True}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(speak)
            body = {"model": t.model, "messages": self.history, "stream": True}
            deltas, cut = 0, 0
            async with self.http.stream("POST", "/chat/completions", json=body) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk: Any = json.loads(line[6:])
                    content = (chunk["choices"] or [{}])[0].get("delta", {}).get("content")
                    if not content:
                        continue
                    reply += content
                    deltas += 1
                    if deltas == t.cut_after_deltas:
                        await send(reply)
                        cut = len(reply)
            await send(reply[cut:])
            await socket[0].send(json.dumps({"text": ""}))
        self.history.append({"role": "assistant", "content": reply})
        if first is None:
            record.errors.append("no audio")
            return time.perf_counter()
        record.first_audio_ms = (first - sent) * 1000
        record.audio_s = samples / t.sample_rate
        return first + record.audio_s


async def run_bare(
    target: str, plan: ClientPlan, sessions: int, seed: int, go: Go
) -> ClientResult[TurnRecord]:
    """``sessions`` bare sessions' turns (``target``: a ``BareTarget``'s JSON),
    after ``go``; the process's CPU over them."""
    aim = BareTarget(**json.loads(target))
    result: ClientResult[TurnRecord] = ClientResult()
    headers = {"Authorization": f"Bearer {KEY}"}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(
        base_url=aim.llm_url, headers=headers, timeout=30, limits=limits
    ) as http:
        bare = [BareSession(aim, plan, http, result) for _ in range(sessions)]
        await run_sessions(bare, plan.ramp_s, seed, result, go, lag=False)
    return result


if __name__ == "__main__":
    client_main(ClientPlan, run_bare)
