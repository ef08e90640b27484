"""serve's sans-I/O parts: the protocol models and frames, the rate limit, the
send queue, the socket sink; and the command line's refusals."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import numpy as np
import pytest

from voice_membrane.server import protocol as p
from voice_membrane.server.outbox import Audio, Close, Outbox
from voice_membrane.server.rate_limit import RateLimit, Verdict
from voice_membrane.server.server import Server
from voice_membrane.server.socket_sink import SocketSink
from voice_membrane.vocab.audio import AudioChunk, pcm16_from_ulaw

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.anyio


def test_client_messages_parse() -> None:
    start = p.parse_client_message('{"type": "session.start", "v": 1, "pipeline": "local"}')
    assert isinstance(start, p.SessionStart)
    assert start.audio == p.Pcm16Format(encoding="pcm16", sample_rate=24000)
    mulaw = p.parse_client_message('{"type": "session.start", "audio": {"encoding": "mulaw"}}')
    assert isinstance(mulaw, p.SessionStart) and mulaw.audio.sample_rate == 8000
    user = p.parse_client_message('{"type": "user.message", "text": "Hi", "participant": "Zoë"}')
    assert isinstance(user, p.UserMessage) and user.participant == "Zoë"
    assert isinstance(p.parse_client_message('{"type": "interrupt"}'), p.Interrupt)
    assert isinstance(p.parse_client_message('{"type": "session.end"}'), p.SessionEnd)


@pytest.mark.parametrize(
    "raw",
    [
        '{"type": "session.start", "v": 2}',
        '{"type": "session.start", "audio": {"encoding": "pcm16", "sample_rate": 44100}}',
        '{"type": "session.start", "audio": {"encoding": "mulaw", "sample_rate": 16000}}',
        '{"type": "session.start", "audio": {"encoding": "opus"}}',
        '{"type": "user.message", "text": "hi", "participant": "Bob: hi"}',
        '{"type": "user.message", "text": "hi", "participant": "<b>"}',
        '{"type": "user.message", "text": 5}',
        '{"type": "interrupt", "now": true}',
        "null",
        '"text"',
    ],
)
def test_bad_client_messages(raw: str) -> None:
    with pytest.raises(p.BadMessage):
        p.parse_client_message(raw)


def test_an_error_message_does_not_echo_a_large_input() -> None:
    with pytest.raises(p.BadMessage) as bad:
        p.parse_client_message(json.dumps({"type": "session.start", "pipeline": "x" * 60000}))
    assert len(str(bad.value)) < 300


def test_frames_round_trip() -> None:
    frame = p.pack_frame(3, 70000, b"\x01\x02")
    assert frame[:8] == (3).to_bytes(4, "little") + (70000).to_bytes(4, "little")
    assert p.unpack_frame(frame) == (3, 70000, b"\x01\x02")
    with pytest.raises(ValueError, match="header"):
        p.unpack_frame(b"\x00")


def test_rate_limit() -> None:
    limit = RateLimit(per_second=20)
    verdicts = [limit.check(0.0) for _ in range(20)]
    assert verdicts == [Verdict.ACCEPT] * 20
    assert limit.check(0.0) is Verdict.REFUSE  # told once
    assert [limit.check(0.0) for _ in range(19)] == [Verdict.REFUSE_QUIETLY] * 19
    assert limit.check(0.0) is Verdict.DISCONNECT  # still flooding
    calm = RateLimit(per_second=20)
    # 20 a second, for ten seconds: never a flood.
    assert all(calm.check(i / 20) is Verdict.ACCEPT for i in range(200))
    after = RateLimit(per_second=20)
    for _ in range(21):
        after.check(0.0)
    assert after.check(0.1) is Verdict.ACCEPT  # two tokens back a tenth of a second later


def test_a_flood_taken_slowly_is_still_one_flood() -> None:
    """A loaded server takes a flooder's messages slowly enough for a token to
    refill now and then: the client is told once and still dropped."""
    limit = RateLimit(per_second=20)
    verdicts = [limit.check(i * 0.01) for i in range(200)]  # 100 a second
    assert verdicts.count(Verdict.REFUSE) == 1
    assert Verdict.DISCONNECT in verdicts
    calm = RateLimit(per_second=20)
    for _ in range(21):
        calm.check(0.0)
    assert calm.check(1.1) is Verdict.ACCEPT  # a second under the limit: the flood is over
    assert [calm.check(1.1) for _ in range(20)][-1] is Verdict.REFUSE  # a new one: told again


def test_outbox_bounds_audio_and_events_apart() -> None:
    box = Outbox(max_audio=3, max_events=100)
    assert all(box.put(f'{{"n": {i}}}') for i in range(50))  # a burst of events is fine
    assert all(box.put(Audio(1, b"x")) for _ in range(3))
    assert not box.put(Audio(1, b"x")) and box.overflowed


async def test_outbox_order_drop_and_close() -> None:
    box = Outbox(max_audio=10, max_events=10)
    box.put("a")
    box.put(Audio(1, b"1"))
    box.put(Audio(2, b"2"))
    box.put("b")
    assert box.drop_audio(1) == 1
    box.close(1000, "bye", "last")
    box.put("after close")  # not sent
    items = [await box.get() for _ in range(len(box))]
    assert items == ["a", Audio(2, b"2"), "b", "last", Close(1000, "bye")]
    discarding = Outbox(max_audio=10, max_events=10)
    discarding.put("queued")
    discarding.close(1008, "slow", "told", discard=True)
    assert [await discarding.get() for _ in range(2)] == ["told", Close(1008, "slow")]


async def test_socket_sink_frames_and_paces() -> None:
    box = Outbox(max_audio=1000, max_events=10)
    sink = SocketSink(box, sample_rate=16000, lead_s=0.1)
    sink.turn = 7
    await sink.open()
    tone = (np.sin(np.arange(22050 // 2) / 5) * 8000).astype(np.int16)  # 0.5 s at 22.05 kHz
    started = time.perf_counter()
    for start in range(0, len(tone), 441):  # 20 ms pieces at the source rate
        await sink.write(AudioChunk(tone[start : start + 441], 22050))
    await sink.drain()
    elapsed = time.perf_counter() - started
    assert elapsed > 0.4  # paced at real time, not as fast as it comes
    frames = [await box.get() for _ in range(len(box))]
    assert all(isinstance(f, Audio) and f.turn == 7 for f in frames)
    decoded = [p.unpack_frame(f.data) for f in frames if isinstance(f, Audio)]
    assert [seq for _, seq, _ in decoded] == list(range(len(decoded)))
    assert all(len(audio) == 320 * 2 for _, _, audio in decoded[:-1])  # 20 ms at 16 kHz
    total = sum(len(audio) for _, _, audio in decoded) / 2
    assert total == pytest.approx(8000, abs=2)
    assert sink.played_seconds == pytest.approx(0.5, abs=0.01)
    assert sink.first_played_ns is not None


async def test_socket_sink_mulaw() -> None:
    box = Outbox(max_audio=1000, max_events=10)
    sink = SocketSink(box, encoding="mulaw", sample_rate=8000, lead_s=10)
    await sink.open()
    tone = (np.sin(np.arange(800) / 3) * 8000).astype(np.int16)
    await sink.write(AudioChunk(tone, 8000))
    frames = [await box.get() for _ in range(len(box))]
    audio = b"".join(p.unpack_frame(f.data)[2] for f in frames if isinstance(f, Audio))
    assert len(audio) == 800  # one byte a sample: 100 ms in 5 frames of 160
    assert np.abs(pcm16_from_ulaw(audio).astype(int) - tone).max() < 400


async def test_socket_sink_stop_drops_what_is_queued() -> None:
    box = Outbox(max_audio=1000, max_events=10)
    sink = SocketSink(box, sample_rate=16000, lead_s=10)  # nothing waits: all queued
    await sink.open()
    box.put("event")
    await sink.write(AudioChunk(np.ones(16000, dtype=np.int16), 16000))
    assert len(box) == 51
    await sink.stop()
    assert [await box.get() for _ in range(len(box))] == ["event"]
    assert sink.played_seconds < 0.1  # what the client had not heard is not counted


async def test_socket_sink_tells_of_an_overflow() -> None:
    overflowed: list[bool] = []
    box = Outbox(max_audio=5, max_events=10)
    sink = SocketSink(
        box, sample_rate=16000, lead_s=10, on_overflow=lambda: overflowed.append(True)
    )
    await sink.open()
    await sink.write(AudioChunk(np.ones(16000 // 50 * 6, dtype=np.int16), 16000))
    assert overflowed


async def test_socket_sink_drops_a_client_that_leaves_a_ping_unanswered_past_the_bound() -> None:
    """``watch_reading``'s count: frames sent after a ping, until it is answered."""
    unread: list[int] = []
    box = Outbox(max_audio=1000, max_events=10)
    sink = SocketSink(box, sample_rate=16000, lead_s=10, on_overflow=lambda: unread.append(1))
    await sink.open()
    frame = np.ones(16000 // 50, dtype=np.int16)
    sink.expect_read(3)
    await sink.write(AudioChunk(np.concatenate([frame, frame]), 16000))
    sink.read_confirmed()  # answered after 2 frames: it reads
    await sink.write(AudioChunk(np.concatenate([frame] * 5), 16000))
    assert unread == []
    sink.expect_read(3)
    await sink.write(AudioChunk(np.concatenate([frame] * 5), 16000))
    assert unread == [1]  # once, at the third frame after the ping


def test_a_public_address_needs_a_token(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text('[llm]\nspec = "local"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="without a token"):
        Server([pipeline], host="0.0.0.0")
    Server([pipeline], host="0.0.0.0", token="t" * 16)  # fine with one
    Server([pipeline], host="localhost")  # loopback: fine without


def run_cli(*args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", **variables}
    return subprocess.run(
        [sys.executable, "-m", "voice_membrane.cli", "serve", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_cli_refusals_are_one_line(tmp_path: Path) -> None:
    public = run_cli("--pipeline", "pipelines/replay.toml", "--host", "0.0.0.0", "--port", "0")
    assert public.returncode != 0 and "Traceback" not in public.stderr
    assert public.stderr.strip().count("\n") == 0 and "without a token" in public.stderr
    missing = run_cli("--pipeline", str(tmp_path / "nope.toml"), "--port", "0")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "nope.toml" in missing.stderr
    twice = run_cli("--pipeline", "pipelines/replay.toml", "--pipeline", "pipelines/replay.toml")
    assert twice.returncode != 0 and "two pipelines are named 'replay'" in twice.stderr


async def test_servers_in_one_process_keep_their_own_metrics(tmp_path: Path) -> None:
    from tests.serve_helpers import running_server

    async with running_server(tmp_path) as one, running_server(tmp_path) as two:
        assert one.state is not None and two.state is not None
        one.state.metrics.turns.inc()
        assert b"voice_membrane_turns_total 1.0" in one.state.metrics.render()
        assert b"voice_membrane_turns_total 0.0" in two.state.metrics.render()
    await anyio.sleep(0)


def test_a_short_token_is_refused_off_loopback(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text('[llm]\nspec = "local"\n', encoding="utf-8")
    short = "fifteen-chars.."
    for host in ("0.0.0.0", "::", "10.1.2.3"):
        with pytest.raises(ValueError, match="at least 16") as refused:
            Server([pipeline], host=host, token=short)
        assert short not in str(refused.value) and "\n" not in str(refused.value)
        Server([pipeline], host=host, token=short + "!")  # 16: fine
    Server([pipeline], host="127.0.0.1", token="short")  # loopback: fine


def test_a_token_on_the_command_line_is_warned_about(tmp_path: Path) -> None:
    token = "a-token-of-24-characters"
    # (a bad port ends the command once the options are read)
    given = run_cli("--pipeline", "pipelines/replay.toml", "--token", token, "--port", "70000")
    lines = given.stderr.strip().splitlines()
    assert given.returncode != 0 and len(lines) == 2 and "Traceback" not in given.stderr
    assert "warning" in lines[0] and "ps" in lines[0] and "VOICE_MEMBRANE_TOKEN" in lines[0]
    assert token not in given.stderr
    from_env = run_cli(
        "--pipeline", "pipelines/replay.toml", "--port", "70000", VOICE_MEMBRANE_TOKEN=token
    )
    assert from_env.returncode != 0 and "warning" not in from_env.stderr


def test_a_short_token_off_loopback_is_one_line(tmp_path: Path) -> None:
    short = "short-token"
    for args, variables in [
        (("--token", short), {}),
        ((), {"VOICE_MEMBRANE_TOKEN": short}),
    ]:
        refused = run_cli(
            "--pipeline",
            "pipelines/replay.toml",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            *args,
            **variables,
        )
        assert refused.returncode != 0 and "Traceback" not in refused.stderr
        last = refused.stderr.strip().splitlines()[-1]
        assert "at least 16" in last and short not in refused.stderr
    bad = run_cli("--pipeline", "pipelines/replay.toml", "--send-buffer-ms", "0")
    assert bad.returncode != 0 and "--send-buffer-ms must be > 0" in bad.stderr
