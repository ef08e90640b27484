"""TwilioSink: μ-law 20 ms media, marks, heard audio from echoed marks, clear on
pause and stop, pause/resume re-sending exactly the unconfirmed audio."""

from __future__ import annotations

import base64
import itertools
import json
import math
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voice_membrane.server.outbox import Audio, Item
from voice_membrane.server.twilio_sink import TwilioSink
from voice_membrane.vocab.audio import AudioChunk, Samples, pcm16_from_ulaw, ulaw_from_pcm16

SID = "MZ00000000000000000000000000000001"
NO_WAIT = 1000.0  # a lead no write ever reaches: the tests do not pace


class FakeOutbox:
    """Queued items until ``flush`` (the connection's sender) takes them."""

    def __init__(self) -> None:
        self.queued: list[Item] = []
        self.sent: list[dict[str, Any]] = []

    def put(self, item: Item) -> bool:
        self.queued.append(item)
        return True

    def drop_audio(self, turn: int) -> int:
        kept = [i for i in self.queued if not (isinstance(i, Audio) and i.turn == turn)]
        dropped = len(self.queued) - len(kept)
        self.queued = kept
        return dropped

    def flush(self) -> list[dict[str, Any]]:
        out = []
        for item in self.queued:
            text = item.data if isinstance(item, Audio) else item
            assert isinstance(text, str)
            out.append(json.loads(text))
        self.queued = []
        self.sent += out
        return out


def media_bytes(messages: list[dict[str, Any]]) -> bytes:
    return b"".join(
        base64.b64decode(m["media"]["payload"]) for m in messages if m["event"] == "media"
    )


def marks(messages: list[dict[str, Any]]) -> list[str]:
    return [m["mark"]["name"] for m in messages if m["event"] == "mark"]


def speech(seconds: float, rate: int = 8000, seed: int = 1) -> Samples:
    rng = np.random.default_rng(seed)
    return rng.integers(-8000, 8000, round(seconds * rate)).astype(np.int16)


async def opened(outbox: FakeOutbox, **options: Any) -> TwilioSink:
    options.setdefault("lead_s", NO_WAIT)
    sink = TwilioSink(outbox, SID, **options)
    await sink.open()
    return sink


@pytest.mark.anyio
async def test_media_are_20_ms_of_mulaw_with_a_mark_every_100_ms() -> None:
    outbox = FakeOutbox()
    sink = await opened(outbox)
    audio = speech(1.0)
    await sink.write(AudioChunk(audio[:3000], 8000))
    await sink.write(AudioChunk(audio[3000:], 8000))
    sent = outbox.flush()
    media = [m for m in sent if m["event"] == "media"]
    assert all(m["streamSid"] == SID for m in sent)
    assert [len(base64.b64decode(m["media"]["payload"])) for m in media] == [160] * 50
    assert media_bytes(sent) == ulaw_from_pcm16(audio)
    assert marks(sent) == [f"vm{n}" for n in range(10)]
    # Each mark follows its fifth frame.
    kinds = [m["event"] for m in sent]
    assert kinds[:6] == ["media"] * 5 + ["mark"]


@pytest.mark.anyio
async def test_played_seconds_come_from_echoed_marks_only() -> None:
    outbox = FakeOutbox()
    sink = await opened(outbox)
    await sink.write(AudioChunk(speech(0.5), 8000))
    outbox.flush()
    assert sink.played_seconds == 0.0  # sent is not heard
    sink.on_mark("vm0")
    assert sink.played_seconds == pytest.approx(0.1)
    sink.on_mark("vm2")  # an echo implies the ones before it
    assert sink.played_seconds == pytest.approx(0.3)
    sink.on_mark("vm1")  # late and out of order: never backwards
    sink.on_mark("someone else's mark")
    sink.on_mark("vm99")  # never sent
    assert sink.played_seconds == pytest.approx(0.3)


@pytest.mark.anyio
async def test_pause_clears_before_any_further_media_and_resume_resends_the_unconfirmed() -> None:
    outbox = FakeOutbox()
    sink = await opened(outbox)
    sink.turn = 3
    audio = speech(0.6)
    ulaw = ulaw_from_pcm16(audio)
    await sink.write(AudioChunk(audio[:2400], 8000))  # 0.3 s: sent
    outbox.flush()
    await sink.write(AudioChunk(audio[2400:], 8000))  # 0.3 s more: still queued
    sink.on_mark("vm0")  # 0.1 s heard
    assert sink.pause()
    after_pause = outbox.flush()
    assert [m["event"] for m in after_pause] == ["clear"]  # the queued media never went
    assert after_pause[0]["streamSid"] == SID
    # Twilio answers the clear with the marks still pending: not heard.
    sink.on_mark("vm1")
    sink.on_mark("vm2")
    assert sink.played_seconds == pytest.approx(0.1)

    # A write while paused waits for the resume: nothing goes out.
    async with anyio.create_task_group() as tg:
        tg.start_soon(sink.write, AudioChunk(speech(0.1, seed=2), 8000))
        await anyio.sleep(0.05)
        assert outbox.queued == []
        sink.resume()
    resent = outbox.flush()
    # From the last confirmed mark: everything the caller may not have heard, then the
    # write that waited; marks where they were, under new names.
    assert media_bytes(resent) == ulaw[800:] + ulaw_from_pcm16(speech(0.1, seed=2))
    names = marks(resent)
    assert names[0] == "vm6" and "vm1" not in names
    sink.on_mark(names[0])
    assert sink.played_seconds == pytest.approx(0.2)  # the first re-sent mark: 0.1 + 0.1


@pytest.mark.anyio
async def test_stop_clears_and_drops_what_was_not_heard() -> None:
    outbox = FakeOutbox()
    sink = await opened(outbox)
    sink.turn = 1
    await sink.write(AudioChunk(speech(0.4), 8000))
    sent = outbox.flush()
    await sink.write(AudioChunk(speech(0.2), 8000))  # queued
    sink.on_mark(marks(sent)[0])
    await sink.stop()
    assert [m["event"] for m in outbox.flush()] == ["clear"]
    sink.on_mark("vm1")  # the clear's echo
    assert sink.played_seconds == pytest.approx(0.1)
    # The next utterance follows what was heard.
    await sink.write(AudioChunk(speech(0.1), 8000))
    nxt = outbox.flush()
    sink.on_mark(marks(nxt)[0])
    assert sink.played_seconds == pytest.approx(0.2)


@pytest.mark.anyio
@pytest.mark.parametrize("cut", ["stop", "pause"])
async def test_without_mark_echoes_what_played_is_estimated_from_the_send_clock(cut: str) -> None:
    # A stream that never echoes marks: an answer cut half-way was still heard
    # up to where the clock says it had played, not "nothing".
    outbox = FakeOutbox()
    sink = await opened(outbox, silent_marks_s=0.2)
    await sink.write(AudioChunk(speech(1.0), 8000))  # sent at once: it plays for 1 s
    outbox.flush()
    await anyio.sleep(0.5)
    if cut == "stop":
        await sink.stop()
    else:
        sink.pause()
    assert [m["event"] for m in outbox.flush()] == ["clear"]
    # What was sent less what had not yet had time to play (a loaded machine
    # only sleeps longer: more played, never all of it before a second).
    assert 0.45 <= sink.played_seconds < 1.0
    heard = sink.played_seconds
    sink.on_mark("vm0")  # the clear's echoes, if any: nothing more
    assert sink.played_seconds == heard


@pytest.mark.anyio
async def test_a_mark_not_yet_late_keeps_the_heard_audio_to_the_echoes() -> None:
    outbox = FakeOutbox()
    sink = await opened(outbox)  # Twilio's round trip is well within a second
    await sink.write(AudioChunk(speech(1.0), 8000))
    outbox.flush()
    await anyio.sleep(0.15)
    sink.on_mark("vm0")
    await sink.stop()
    assert sink.played_seconds == pytest.approx(0.1)


@pytest.mark.anyio
async def test_stop_with_everything_heard_sends_no_clear() -> None:
    outbox = FakeOutbox()
    sink = await opened(outbox)
    await sink.write(AudioChunk(speech(0.1), 8000))
    sink.on_mark(marks(outbox.flush())[0])
    await sink.stop()
    assert outbox.flush() == []


async def echo_marks(outbox: FakeOutbox, sink: TwilioSink, until: anyio.Event) -> None:
    """Twilio playing at once: every mark sent is echoed."""
    while not until.is_set():
        for message in outbox.flush():
            if message["event"] == "mark":
                sink.on_mark(message["mark"]["name"])
        await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_drain_ends_with_a_mark_and_waits_for_its_echo() -> None:
    outbox = FakeOutbox()
    sink = await opened(outbox, lead_s=0.0)
    audio = speech(0.13)  # six frames and a half: the last frame is short
    await sink.write(AudioChunk(audio, 8000))
    done = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(echo_marks, outbox, sink, done)
            await sink.drain()
            done.set()
    assert media_bytes(outbox.sent) == ulaw_from_pcm16(audio)
    assert marks(outbox.sent) == ["vm0", "vm1"]  # after 100 ms, and the end
    assert sink.played_seconds == pytest.approx(0.13)
    assert sink.first_played_ns is not None


@pytest.mark.anyio
async def test_drain_without_echoes_gives_up_after_the_timeout() -> None:
    outbox = FakeOutbox()
    sink = await opened(outbox, lead_s=0.0, echo_timeout_s=0.2)
    await sink.write(AudioChunk(speech(0.05), 8000))
    with anyio.fail_after(10):
        await sink.drain()
    assert sink.played_seconds == pytest.approx(0.05)
    sink.on_mark("vm0")  # a late echo changes nothing
    assert sink.played_seconds == pytest.approx(0.05)


@pytest.mark.anyio
async def test_drain_while_paused_waits_for_the_resume() -> None:
    outbox = FakeOutbox()
    sink = await opened(outbox, lead_s=0.0, echo_timeout_s=0.3)
    await sink.write(AudioChunk(speech(0.1), 8000))
    outbox.flush()
    sink.pause()
    drained = anyio.Event()

    async def drain() -> None:
        await sink.drain()
        drained.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            await anyio.sleep(0.6)  # twice the echo timeout: paused, it does not give up
            assert not drained.is_set()
            assert sink.played_seconds == 0.0
            sink.resume()
            done = anyio.Event()
            tg.start_soon(echo_marks, outbox, sink, done)
            await drained.wait()
            done.set()
    assert sink.played_seconds == pytest.approx(0.1)


def _chunks(samples: Samples, cuts: list[int]) -> list[Samples]:
    points = sorted({c % (len(samples) + 1) for c in cuts} | {0, len(samples)})
    return [samples[a:b] for a, b in itertools.pairwise(points)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rate=st.sampled_from([16000, 22050, 24000, 48000]),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_resampled_media_do_not_depend_on_how_the_audio_was_cut(rate: int, cuts: list[int]) -> None:
    samples = speech(0.1, rate, seed=rate)  # (drain waits out its play time: kept short)

    async def send(pieces: list[Samples]) -> bytes:
        outbox = FakeOutbox()
        sink = await opened(outbox, lead_s=0.0, echo_timeout_s=0.01)
        for piece in pieces:
            await sink.write(AudioChunk(piece, rate))
        await sink.drain()
        return media_bytes(outbox.flush())

    whole = anyio.run(send, [samples])
    assert len(whole) == round(len(samples) * 8000 / rate)
    assert anyio.run(send, _chunks(samples, cuts)) == whole


@pytest.mark.anyio
async def test_mulaw_8k_from_the_engine_passes_through_unchanged() -> None:
    # ElevenLabs' ulaw_8000, decoded by the engine to PCM: no resampling, and the same
    # μ-law codes go to Twilio (but μ-law's "negative zero", also silence).
    codes = bytes(c for c in range(256) if c != 0x7F) * 4
    outbox = FakeOutbox()
    sink = await opened(outbox, lead_s=0.0, echo_timeout_s=0.01)
    await sink.write(AudioChunk(pcm16_from_ulaw(codes), 8000))
    await sink.drain()
    assert media_bytes(outbox.flush()) == codes


@pytest.mark.anyio
async def test_a_pause_with_everything_heard_sends_nothing_until_the_resume() -> None:
    # A reply held before it starts (Session.hold_playout), or speech after the
    # audio so far has played: Twilio holds nothing to clear.
    outbox = FakeOutbox()
    sink = await opened(outbox)
    await sink.write(AudioChunk(speech(0.1), 8000))
    sink.on_mark(marks(outbox.flush())[0])
    sink.pause()
    async with anyio.create_task_group() as tg:
        tg.start_soon(sink.write, AudioChunk(speech(0.1, seed=3), 8000))
        await anyio.sleep(0.05)
        assert outbox.flush() == []
        sink.resume()
    assert media_bytes(outbox.flush()) == ulaw_from_pcm16(speech(0.1, seed=3))


class FakeClock:
    """The sink's clock and sleep: a sleep moves the time on at once (a paced
    write is then instant and its schedule exact)."""

    def __init__(self) -> None:
        self.now_ns = 1_000_000_000
        self.sleeps: list[float] = []

    def perf_counter_ns(self) -> int:
        return self.now_ns

    async def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now_ns += round(seconds * 1e9)
        await anyio.sleep(0)


class TimedOutbox(FakeOutbox):
    """Also notes when (by the fake clock) each media message was queued."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.media_at: list[tuple[int, int]] = []  # (time, bytes)

    def put(self, item: Item) -> bool:
        if isinstance(item, Audio) and '"media"' in item.data:
            payload = json.loads(item.data)["media"]["payload"]
            self.media_at.append((self.clock.now_ns, len(base64.b64decode(payload))))
        return super().put(item)


def mark_positions(messages: list[dict[str, Any]]) -> list[int]:
    """The audio (bytes) sent before each mark."""
    sent, out = 0, []
    for m in messages:
        if m["event"] == "media":
            sent += len(base64.b64decode(m["media"]["payload"]))
        elif m["event"] == "mark":
            out.append(sent)
    return out


@settings(max_examples=60, deadline=None)
@given(
    refill_s=st.sampled_from([0.02, 0.04, 0.06, 0.1, 0.2]),
    cuts=st.lists(st.integers(0, 8000), max_size=20),
)
def test_batched_media_keep_the_bytes_and_marks_and_stay_within_the_lead(
    refill_s: float, cuts: list[int]
) -> None:
    from types import SimpleNamespace

    import voice_membrane.server.phone_sink as twilio_sink  # (where the sink lives)

    samples = speech(1.0, seed=7)
    lead_s = 0.2

    def send(pieces: list[Samples], refill: float) -> tuple[TimedOutbox, FakeClock]:
        clock = FakeClock()
        fake_anyio = SimpleNamespace(
            sleep=clock.sleep, Event=anyio.Event, move_on_after=anyio.move_on_after
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(twilio_sink, "time", clock)
            patch.setattr(twilio_sink, "anyio", fake_anyio)
            outbox = TimedOutbox(clock)

            async def run() -> None:
                sink = TwilioSink(outbox, SID, lead_s=lead_s, refill_s=refill)
                await sink.open()
                for piece in pieces:
                    await sink.write(AudioChunk(piece, 8000))

            anyio.run(run)
        return outbox, clock

    frames = [samples[i : i + 160] for i in range(0, len(samples), 160)]
    reference, _ = send(frames, 0.02)  # one frame at a time
    outbox, clock = send(_chunks(samples, cuts), refill_s)
    expected = reference.flush()
    sent = outbox.flush()
    assert media_bytes(sent) == media_bytes(expected) == ulaw_from_pcm16(samples[:8000])
    assert mark_positions(sent) == mark_positions(expected)
    # Twilio never holds more than the lead; media go out refill_s at a time
    # (a wake-up per batch, not per frame).
    ends = 0
    for at, size in outbox.media_at:
        ends = max(ends, at) + size * 1_000_000_000 // 8000
        assert ends - at <= lead_s * 1e9
    wake_ups = len({at for at, _ in outbox.media_at})
    assert wake_ups <= 1 + math.ceil((1.0 - lead_s) / refill_s - 1e-9)
    assert len(clock.sleeps) <= wake_ups


@pytest.mark.anyio
@pytest.mark.parametrize("paused", [False, True])
async def test_a_write_waiting_across_a_stop_sends_nothing_after_the_clear(paused: bool) -> None:
    # A batch waits for room within the lead; the turn is interrupted meanwhile (a
    # stop, or a pause then a stop): none of the rest of that write follows the clear.
    outbox = FakeOutbox()
    sink = await opened(outbox, lead_s=0.06, refill_s=0.02)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sink.write, AudioChunk(speech(1.0), 8000))
        await anyio.sleep(0.1)  # the write is waiting, part of it sent
        if paused:
            sink.pause()
        await sink.stop()
    sent = outbox.flush()
    assert [m["event"] for m in sent][-1] == "clear"
    assert sink.clears_sent == 1
