"""The send path of a served session: the socket sink's frames and pacing, the
outbox's batches and their one socket write each."""

from __future__ import annotations

import time

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

from voice_membrane.pipeline.audio_stages import _frames
from voice_membrane.server import protocol as p
from voice_membrane.server.batch_send import send_batch
from voice_membrane.server.outbox import Audio, Outbox
from voice_membrane.server.socket_sink import SocketSink
from voice_membrane.vocab.audio import AudioChunk

pytestmark = pytest.mark.anyio

RATE = 16000
FRAME = RATE * p.FRAME_MS // 1000


HOLDING_S = 6  # a whole number of 20, 40 and 60 ms frames


def _sink_frames(
    pieces: list[int], frame_ms: int = p.FRAME_MS, *, low: bool = False
) -> list[tuple[int, int, bytes]]:
    """The frames a socket sink of ``frame_ms`` frames queues for a ramp cut
    into writes of ``pieces``, all within its lead: to a client that holds
    nothing and stays under the low mark (``low``), or to one that already
    holds ``HOLDING_S`` and never runs low (the frames it got first left out)."""
    samples = np.arange(sum(pieces), dtype=np.int16)

    async def run() -> list[tuple[int, int, bytes]]:
        box = Outbox(max_audio=100_000, max_events=10)
        lead_s, refill_s = (100.0, 0.0) if low else (10.0, 10.0)  # low mark: 100 s, or 0
        sink = SocketSink(
            box, sample_rate=RATE, lead_s=lead_s, refill_s=refill_s, frame_ms=frame_ms
        )
        await sink.open()
        if not low:
            await sink.write(AudioChunk(np.zeros(RATE * HOLDING_S, dtype=np.int16), RATE))
            box.take_audio(100_000)
            sink.sequence = 0
        sink.turn = 3
        start = 0
        for size in pieces:
            await sink.write(AudioChunk(samples[start : start + size], RATE))
            start += size
        with anyio.CancelScope() as scope:
            scope.cancel()  # the partial last frame goes out; no wait for it to play
            await sink.drain()
        return [p.unpack_frame(d) for d in box.take_audio(100_000) if isinstance(d, bytes)]

    return anyio.run(run)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(min_value=1, max_value=3 * FRAME), min_size=1, max_size=20),
    st.sampled_from([20, 40, 60]),  # what a client may ask for (protocol 1.2)
)
def test_rechunking_the_writes_never_changes_the_frames_sent(
    pieces: list[int], frame_ms: int
) -> None:
    # (a client that never runs low: a write's part of a frame waits for the next)
    frames = _sink_frames(pieces, frame_ms)
    whole = _sink_frames([sum(pieces)], frame_ms)
    assert frames == whole  # same numbering, same boundaries, same bytes
    audio = b"".join(a for _, _, a in frames)
    assert audio == np.arange(sum(pieces), dtype=np.int16).tobytes()
    assert all(len(a) == RATE * frame_ms // 1000 * 2 for _, _, a in frames[:-1])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(min_value=1, max_value=3 * FRAME), min_size=1, max_size=20),
    st.sampled_from([20, 40, 60]),
)
def test_a_client_running_low_gets_each_write_whole_and_nothing_lost(
    pieces: list[int], frame_ms: int
) -> None:
    """Always below the low mark (a turn's start, all the way): what a write
    leaves of a frame goes out with it, as a shorter frame, never held back."""
    frames = _sink_frames(pieces, frame_ms, low=True)
    assert [n for _, n, _ in frames] == list(range(len(frames)))
    audio = b"".join(a for _, _, a in frames)
    assert audio == np.arange(sum(pieces), dtype=np.int16).tobytes()
    size = RATE * frame_ms // 1000
    ends = np.cumsum([len(a) // 2 for _, _, a in frames])
    # every write's end is a frame's end; between them, whole frames
    assert set(np.cumsum(pieces).tolist()) <= set(ends.tolist())
    assert all(len(a) <= size * 2 for _, _, a in frames)
    assert len(frames) == sum(-(-n // size) for n in pieces)  # each write: its frames


async def test_at_a_turn_s_start_a_part_of_a_frame_is_not_held_back() -> None:
    """60 ms frames and a voice's first 100 ms: both the frame and the 40 ms
    left go out at once (held back, the client would run dry before the next
    chunk); once the client holds its margin, a part waits for the next write."""
    box = Outbox(max_audio=1000, max_events=10)
    sink = SocketSink(box, sample_rate=RATE, lead_s=0.2, refill_s=0.06, frame_ms=60)
    await sink.open()
    await sink.write(AudioChunk(np.zeros(RATE // 10, dtype=np.int16), RATE))
    sizes = [len(p.unpack_frame(d)[2]) // 2 for d in box.take_audio(1000) if isinstance(d, bytes)]
    assert sizes == [960, 640]  # 60 ms, then the 40 ms left
    await sink.write(AudioChunk(np.zeros(RATE // 10, dtype=np.int16), RATE))  # 100 ms more
    # a frame: the client holds ~160 ms, over the 140 ms mark, so the 40 ms left
    # wait for the next write
    sizes = [len(p.unpack_frame(d)[2]) // 2 for d in box.take_audio(1000) if isinstance(d, bytes)]
    assert sizes == [960]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=1, max_value=5000),
    st.sampled_from([0.02, 0.05, 0.1, 0.137]),
)
def test_the_turn_cuts_audio_into_blocks_without_losing_a_sample(n: int, block_s: float) -> None:
    samples = np.arange(n, dtype=np.int16)
    blocks = list(_frames(AudioChunk(samples, RATE), RATE, block_s))
    assert np.array_equal(np.concatenate([b.samples for b in blocks]), samples)
    assert all(len(b.samples) == round(RATE * block_s) for b in blocks[:-1])


@pytest.mark.parametrize("frame_ms", [20, 40, 60])
async def test_a_paced_write_sends_in_batches_within_the_lead(frame_ms: int) -> None:
    """0.6 s in one write, lead 0.2 s, refill 0.1 s: no frame goes out more than
    the lead ahead of a client playing from the first frame, and the frames leave
    in a few batches (one wake-up each), not one per frame."""
    box = Outbox(max_audio=1000, max_events=10)
    sink = SocketSink(box, sample_rate=RATE, lead_s=0.2, refill_s=0.1, frame_ms=frame_ms)
    await sink.open()
    batches: list[int] = []
    worst_ahead_s = 0.0

    async def client() -> None:
        nonlocal worst_ahead_s
        sent_s, first = 0.0, 0.0
        while sent_s < 0.6 - 1e-9:
            item = await box.get()
            batch = [item, *box.take_audio(1000)]
            first = first or time.perf_counter()
            sent_s += len(batch) * frame_ms / 1000
            worst_ahead_s = max(worst_ahead_s, sent_s - (time.perf_counter() - first))
            batches.append(len(batch))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(client)
            await sink.write(AudioChunk(np.zeros(RATE * 6 // 10, dtype=np.int16), RATE))
    assert sum(batches) == 600 // frame_ms
    assert worst_ahead_s <= 0.2 + 1e-6
    assert batches[0] == 200 // frame_ms  # the lead at once
    assert len(batches) <= 8  # then ~100 ms a wake-up (a late wake-up only makes more per batch)


async def test_a_pause_holds_a_write_in_progress() -> None:
    box = Outbox(max_audio=1000, max_events=10)
    sink = SocketSink(box, sample_rate=RATE, lead_s=0.1, refill_s=0.05)
    await sink.open()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sink.write, AudioChunk(np.zeros(RATE // 2, dtype=np.int16), RATE))
            await anyio.sleep(0.15)
            sink.pause()
            held = len(box)
            assert held < 25  # 0.5 s is 25 frames: the write is still going
            await anyio.sleep(0.3)
            assert len(box) == held  # paused: nothing more went out
            sink.resume()
    assert len(box) == 25


def test_the_outbox_hands_over_the_audio_at_its_head() -> None:
    box = Outbox(max_audio=10, max_events=10)
    for item in (Audio(1, b"a"), Audio(1, "media"), Audio(1, b"c"), "event", Audio(1, b"d")):
        box.put(item)
    assert box.take_audio(2) == [b"a", "media"]
    assert box.take_audio(10) == [b"c"]  # an event stops the batch: order is kept
    assert box.take_audio(10) == []
    assert len(box) == 2
    assert all(box.put(Audio(1, b"x")) for _ in range(9))  # the count went down with them
    assert not box.put(Audio(1, b"x"))


async def test_a_batch_is_one_socket_write_of_separate_messages() -> None:
    batch: list[bytes | str] = [p.pack_frame(1, n, bytes([n]) * 640) for n in range(5)]
    batch.insert(2, '{"type": "between"}')
    writes: list[int] = []

    async def handler(ws: ServerConnection) -> None:
        write = ws.transport.write

        def counted(data: bytes | bytearray | memoryview) -> None:
            writes.append(len(data))
            write(data)

        ws.transport.write = counted  # type: ignore[method-assign]
        await send_batch(ws, batch)
        await send_batch(ws, [b"alone"])
        ws.transport.write = write  # type: ignore[method-assign]
        await ws.wait_closed()

    with anyio.fail_after(10):
        async with serve(handler, "127.0.0.1", 0, compression=None) as server:
            port = server.sockets[0].getsockname()[1]
            async with connect(f"ws://127.0.0.1:{port}") as client:
                received = [await client.recv() for _ in range(len(batch) + 1)]
    assert received == [*batch, b"alone"]  # each its own message, binary or text, in order
    assert len(writes) == 2  # the batch in one write, the single message in another
