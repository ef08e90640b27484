"""Driving a TTS engine's turn stream as TtsStage does: pieces pushed by one task,
audio read by another."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import anyio
import numpy as np

from voice_membrane.tts.base import TtsEngine, Voiced

PIECES = ["Hello there, friend.", "The weather is fine today.", "See you soon."]


async def run_stream(
    engine: TtsEngine,
    pieces: Sequence[str],
    voiced: list[Voiced] | None = None,
    *,
    limit_s: float = 20,
) -> list[Voiced]:
    """Push ``pieces`` from one task, read the audio in another: every Voiced (into
    ``voiced`` as it comes, so a test sees what came before an error)."""
    got: list[Voiced] = [] if voiced is None else voiced
    try:
        with anyio.fail_after(limit_s):
            async with engine.open_stream() as stream:

                async def feed() -> None:
                    for piece in pieces:
                        await stream.push(piece)
                    await stream.end_input()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(feed)
                    async for voiced in stream:
                        got.append(voiced)
    except BaseExceptionGroup as group:  # the error itself, for pytest.raises
        first = group.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
    return got


def samples_of(voiced: list[Voiced]) -> np.ndarray:
    return np.concatenate([v.audio.samples for v in voiced]) if voiced else np.zeros(0, np.int16)


def piece_chars(voiced: list[Voiced], piece: int) -> str:
    return "".join("".join(v.alignment.chars) for v in voiced if v.piece == piece and v.alignment)


def task_count() -> int:
    return len(asyncio.all_tasks())


async def tasks_settle(before: int) -> bool:
    """True once no more tasks run than ``before`` (an async generator's
    finalizer may take a moment to run; a real leak never goes)."""
    with anyio.move_on_after(5):
        while True:
            if task_count() <= before:
                return True
            await anyio.sleep(0.01)
    return False
