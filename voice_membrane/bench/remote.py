"""Measure a running ``serve`` endpoint as its client sees it (``bench --url``):
``concurrency`` WebSocket sessions run the turns as ``runner.Schedule`` shares
them out. A turn's client first audio runs from sending ``user.message`` to the
turn's first binary audio frame (this process's clock); the server's own stamps
come with its ``metrics`` event. A session keeps its history (the protocol
cannot clear it). Anything that ends a session (a refused connection, close
4401 or 1013, a lost socket) ends the target with a one-line ``error``."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import anyio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from ..infra.redact import redact
from ..pipeline.metrics import LatencyReport
from ..server.protocol import CLOSE_TRY_AGAIN, CLOSE_UNAUTHORIZED, unpack_frame
from .runner import GAP_S, OnTurn, Schedule, Target, TargetRun, TurnSample, one_line

TURN_TIMEOUT_S = 120.0  # against a hung server only; a turn's audio is paced to real time
CONNECT_TIMEOUT_S = 15.0
CLOSE_WAIT_S = 2.0  # for the close code that follows a refusing error event
CLOSE_MEANING = {
    CLOSE_UNAUTHORIZED: "wrong or missing token",
    CLOSE_TRY_AGAIN: "server full or draining: try another replica",
}


class RemoteError(Exception):
    """Why a session cannot go on; one line, never holding the token."""


async def next_event(ws: ClientConnection) -> dict[str, Any]:
    """The next JSON event, skipping audio frames (of earlier turns)."""
    while True:
        data = await ws.recv()
        if isinstance(data, str):
            return dict(json.loads(data))


async def start_session(
    ws: ClientConnection,
    *,
    pipeline: str | None = None,
    audio: dict[str, Any] | None = None,
    input_audio: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``session.start`` (asking for ``pipeline``, ``audio`` and ``input_audio``,
    the client's voice, if given) and the server's ``session.started``;
    ``RemoteError`` when it refuses or answers else."""
    start: dict[str, Any] = {"type": "session.start", "v": 1}
    if pipeline is not None:
        start["pipeline"] = pipeline
    if audio is not None:
        start["audio"] = audio
    if input_audio is not None:
        start["input_audio"] = input_audio
    await ws.send(json.dumps(start))
    reply = await next_event(ws)
    if reply["type"] == "error":
        refused = f"{reply.get('code')}: {reply.get('message')}"
        code = None
        if reply.get("code") in ("full", "draining"):  # the close (1013) follows
            with anyio.move_on_after(CLOSE_WAIT_S):
                await ws.wait_closed()
            code = ws.close_code
        raise RemoteError(refused if code is None else f"closed with {code}: {refused}")
    if reply["type"] != "session.started":
        raise RemoteError(f"expected session.started, got {reply['type']}")
    return reply


class _Client:
    def __init__(self, ws: ClientConnection, index: int) -> None:
        self.ws = ws
        self.index = index

    async def turn(self, prompt: str, warm_up: bool) -> TurnSample:
        await anyio.sleep(GAP_S)
        message = json.dumps({"type": "user.message", "text": prompt})
        # Stamped before the send: the client's own framing is part of what it waits.
        sent = time.perf_counter_ns()
        await self.ws.send(message)
        turn: int | None = None
        first_audio: float | None = None
        report: LatencyReport | None = None
        while True:
            data = await self.ws.recv()
            if isinstance(data, bytes):
                if first_audio is None and turn is not None and unpack_frame(data)[0] == turn:
                    first_audio = round((time.perf_counter_ns() - sent) / 1e6, 3)
                continue
            event = json.loads(data)
            kind = event["type"]
            if kind == "turn.started" and turn is None:
                turn = int(event["turn"])
            elif kind == "error" and event.get("turn") in (None, turn):
                # A turn's own llm_error / tts_error follows its turn.end (handled
                # there); one before turn.started (busy, draining) refuses the message.
                if turn is None:
                    raise RemoteError(f"{event.get('code')}: {event.get('message')}")
            elif turn is None or event.get("turn") != turn:
                continue  # what is left of an earlier turn
            elif kind == "metrics":
                report = LatencyReport.from_dict(event["report"])
            elif kind == "turn.end":
                error = None if event.get("error") is None else redact(str(event["error"]))
                return TurnSample(prompt, self.index, warm_up, report, error, first_audio)


async def run_remote(
    target: Target,
    prompts: Sequence[str],
    *,
    token: str | None,
    turns: int,
    warmup: int,
    concurrency: int,
    warm_up_prompt: str,
    on_turn: OnTurn = lambda run, turn: None,
) -> TargetRun:
    """``turns`` counted turns against ``target.url`` over ``concurrency`` sessions,
    after ``warmup`` turns per session (``Schedule``)."""
    assert target.url is not None
    url = target.url
    run = TargetRun(target, sessions=concurrency)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    schedule = Schedule(prompts, turns, warmup, concurrency, warm_up_prompt, on_turn)

    async def one_session(index: int, cancel: anyio.CancelScope) -> None:
        try:
            with anyio.fail_after(CONNECT_TIMEOUT_S):
                ws = await connect(url, additional_headers=headers, open_timeout=None)
            async with ws:
                with anyio.fail_after(CONNECT_TIMEOUT_S):
                    started = await start_session(ws, pipeline=target.server_pipeline)
                run.llm, run.tts = str(started.get("llm", "")), str(started.get("tts", ""))
                await schedule.play(run, _Client(ws, index), index, TURN_TIMEOUT_S)
                await ws.send(json.dumps({"type": "session.end"}))
        except Exception as exc:  # every failure is this target's one line
            if run.error is None:
                run.error = _session_error(exc, token)
            cancel.cancel()  # the other sessions stop: the target is not measured

    async with anyio.create_task_group() as tg:
        for index in range(concurrency):
            tg.start_soon(one_session, index, tg.cancel_scope)
    return run


def _session_error(exc: Exception, token: str | None) -> str:
    if isinstance(exc, ConnectionClosed):
        frame = exc.rcvd
        if frame is None:
            text = "the server closed the connection without a close frame"
        else:
            meaning = CLOSE_MEANING.get(frame.code, frame.reason or "closed")
            text = f"closed with {frame.code} ({meaning})"
    elif isinstance(exc, ConnectionRefusedError):
        text = "connection refused: is serve running there?"
    elif isinstance(exc, TimeoutError):
        text = "no answer in time"
    elif isinstance(exc, RemoteError | InvalidURI | InvalidHandshake):
        text = str(exc)
    elif isinstance(exc, KeyError | TypeError | ValueError):
        text = f"not the voice_membrane protocol: {one_line(exc)}"
    else:
        text = one_line(exc)
    if token:
        text = text.replace(token, "[token]")
    return redact(" ".join(text.split()))
