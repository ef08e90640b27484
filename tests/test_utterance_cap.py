"""``[endpoint] max_utterance_s``: speech that never pauses (a monologue, a TV
the detector takes for the user) does not keep a billed STT stream open. At the
cap the stream is asked to settle, what it heard is the turn, the listener says
so (``UtteranceCapped``, the ``utterance_capped`` event), and the speech that
goes on is not sent anywhere until a pause. The input: espeak-ng reading a long
sentence with no punctuation, one stretch of speech for the detector."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf  # type: ignore[import-untyped]
from serve_helpers import SHORT_REPLY, start, write_pipeline
from serve_voice_helpers import silence, speak
from websockets.asyncio.client import connect

from voice_membrane.listening.resample import StreamResampler
from voice_membrane.pipeline.config import ConfigError, load_pipeline
from voice_membrane.pipeline.listen_build import listener_for, stt_for
from voice_membrane.pipeline.listening import (
    ListenItem,
    SpeechBegan,
    SpeechEnded,
    UserTurn,
    UtteranceCapped,
)
from voice_membrane.server.server import Server
from voice_membrane.sources.base import Frame
from voice_membrane.testing.fake_deepgram import FakeDeepgram
from voice_membrane.testing.transcript_script import TranscriptScript
from voice_membrane.vocab.audio import Samples

if shutil.which("espeak-ng") is None:
    pytest.skip("espeak-ng is not installed", allow_module_level=True)

RATE = 16000
KEY = "dg-test-" + "c" * 32
HEARD = "the weather in paris is mild"
# Sent to the STT besides the capped speech: the pre-roll (0.5 s at most) and
# the frame the cap fell in (frames queued behind it merged: 0.1 s and one more).
SLACK_S = 0.5 + 0.2
SENTENCE = (
    "the weather in paris is mild and grey with light rain in the morning and the clouds "
    "break up after lunch while the wind stays light from the west"
)


def continuous_speech(folder: Path, repeats: int) -> Samples:
    """``SENTENCE`` ``repeats`` times over with no pause (7 s each), at 16 kHz."""
    wav = folder / "monologue.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), " ".join([SENTENCE] * repeats)], check=True)
    samples, rate = sf.read(wav, dtype="int16")
    return StreamResampler(rate, RATE).feed(np.asarray(samples, dtype=np.int16))


@pytest.fixture
def ears(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDeepgram]:
    fake = FakeDeepgram(TranscriptScript.of(HEARD, word_s=0.3), api_key=KEY)
    with fake:
        monkeypatch.setenv("DEEPGRAM_API_KEY", KEY)
        monkeypatch.delenv("DEEPGRAM_BASE_URL", raising=False)
        yield fake


def capped_pipeline(folder: Path, ears: FakeDeepgram, max_s: float) -> Path:
    path = write_pipeline(folder, "ears", SHORT_REPLY)
    path.write_text(
        path.read_text() + f'\n[stt]\nspec = "deepgram:nova-3"\nbase_url = "{ears.base_url}"\n\n'
        f'[endpoint]\necho = "aec"\nmax_utterance_s = {max_s}\n'
    )
    return path


def test_forty_seconds_of_speech_are_cut_at_the_cap(tmp_path: Path, ears: FakeDeepgram) -> None:
    audio = continuous_speech(tmp_path, 6)
    assert len(audio) / RATE > 40
    config = load_pipeline(capped_pipeline(tmp_path, ears, 10))

    async def listen() -> list[ListenItem]:
        stt = stt_for(config)
        await stt.start()
        try:
            listener = listener_for(config, stt)
            send, receive = anyio.create_memory_object_stream[ListenItem](10_000)

            async def frames() -> Any:
                for i in range(0, len(audio), 320):  # as fast as they go: decided by samples
                    yield Frame(audio[i : i + 320], RATE, i, 0)

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(listener.run, frames(), send)
                    async with receive:
                        items = [item async for item in receive]
            return items
        finally:
            await stt.aclose()

    items = anyio.run(listen)
    (began,) = [i for i in items if isinstance(i, SpeechBegan)]
    (capped,) = [i for i in items if isinstance(i, UtteranceCapped)]
    assert capped.max_s == 10 and capped.at_s == pytest.approx(began.at_s + 10, abs=1e-3)
    (turn,) = [i for i in items if isinstance(i, UserTurn)]
    assert turn.text == HEARD
    # The detector heard one stretch to the end; the STT only its first 10 s
    # (with the pre-roll and the frame the cap fell in), then Finalize.
    (ended,) = [i for i in items if isinstance(i, SpeechEnded)]
    assert ended.at_s > 40
    (conn,) = ears.connections
    assert conn.samples / RATE < 10 + SLACK_S
    assert {"type": "Finalize"} in conn.controls
    assert items.index(capped) < items.index(turn)


def test_the_cap_is_off_at_zero_and_never_below_a_second(
    tmp_path: Path, ears: FakeDeepgram
) -> None:
    assert load_pipeline(capped_pipeline(tmp_path, ears, 0)).endpoint.max_utterance_s == 0
    with pytest.raises(ConfigError, match=r"max_utterance_s: 0 \(no cap\) or at least 1 s"):
        load_pipeline(capped_pipeline(tmp_path, ears, 0.5))


@pytest.mark.anyio
async def test_a_served_session_is_told_its_utterance_was_capped(
    tmp_path: Path, ears: FakeDeepgram
) -> None:
    audio = continuous_speech(tmp_path, 1)[: 6 * RATE]  # 6 s of speech, capped at 3 s
    lines: list[tuple[str, dict[str, Any]]] = []
    path = capped_pipeline(tmp_path, ears, 3)
    async with (
        Server([path], port=0, log=lambda event, **f: lines.append((event, f))) as server,
        connect(server.ws_url) as ws,
    ):
        await start(
            ws,
            pipeline="ears",
            input_audio={"encoding": "pcm16", "sample_rate": RATE, "frame_ms": 20},
        )
        said = np.concatenate([silence(0.3), audio])
        got = await speak(ws, said, until=lambda r: r.turn_end(1) is not None, guard_s=60)
    kinds = [e["type"] for e in got.events]
    (capped,) = got.of("utterance_capped")
    (began,) = got.of("vad.speech_start")
    assert capped["max_utterance_s"] == 3
    assert capped["at_ms"] == pytest.approx(began["at_ms"] + 3000, abs=1)
    assert kinds.index("utterance_capped") < kinds.index("turn.started")
    assert got.of("turn.started")[0]["text"] == HEARD
    metrics = next(e for e in got.of("metrics") if e["turn"] == 1)["report"]
    assert metrics["heard"]["text"] == HEARD
    logged = [f for e, f in lines if e == "utterance_capped"]
    assert len(logged) == 1 and logged[0]["max_utterance_s"] == 3
    assert ears.connections[0].samples / RATE < 3 + SLACK_S
    assert KEY not in json.dumps(lines, default=str)
