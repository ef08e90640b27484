"""Speech that settles with no words (music the detector takes for speech,
noise, a language the recognizer cannot hear) is no turn, and a served client
is told so once: the ``no_words`` event (issue 43), logged, with where the
speech stopped and how long it was. The recognizer is the fake Deepgram
answering every utterance with an empty final, as the real one does for
speech it cannot make words of."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from serve_helpers import SHORT_REPLY, start, write_pipeline
from serve_voice_helpers import silence, speak
from test_utterance_cap import KEY, RATE, continuous_speech
from websockets.asyncio.client import connect

from voice_membrane.server.server import Server
from voice_membrane.testing.fake_deepgram import FakeDeepgram
from voice_membrane.testing.transcript_script import TranscriptScript


@pytest.fixture
def deaf(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDeepgram]:
    fake = FakeDeepgram(TranscriptScript(), api_key=KEY)  # no words, ever
    with fake:
        monkeypatch.setenv("DEEPGRAM_API_KEY", KEY)
        monkeypatch.delenv("DEEPGRAM_BASE_URL", raising=False)
        yield fake


@pytest.mark.anyio
async def test_a_served_session_is_told_once_that_speech_had_no_words(
    tmp_path: Path, deaf: FakeDeepgram
) -> None:
    path = write_pipeline(tmp_path, "deaf", SHORT_REPLY)
    path.write_text(
        path.read_text() + f'\n[stt]\nspec = "deepgram:nova-3"\nbase_url = "{deaf.base_url}"\n\n'
        '[endpoint]\necho = "aec"\n'
    )
    speech = continuous_speech(tmp_path, 1)[: 3 * RATE]  # 3 s of speech, then quiet
    lines: list[tuple[str, dict[str, Any]]] = []
    async with (
        Server([path], port=0, log=lambda event, **f: lines.append((event, f))) as server,
        connect(server.ws_url) as ws,
    ):
        await start(
            ws,
            pipeline="deaf",
            input_audio={"encoding": "pcm16", "sample_rate": RATE, "frame_ms": 20},
        )
        said = np.concatenate([silence(0.3), speech])
        got = await speak(ws, said, until=lambda r: bool(r.of("no_words")), guard_s=30)
    (told,) = got.of("no_words")
    (ended,) = got.of("vad.speech_end")
    (began,) = got.of("vad.speech_start")
    assert told["at_ms"] == pytest.approx(ended["at_ms"], abs=1)
    assert told["speech_ms"] == pytest.approx(ended["at_ms"] - began["at_ms"], abs=1)
    assert 2500 <= told["speech_ms"] <= 3200, told
    assert not got.of("turn.started")
    logged = [f for e, f in lines if e == "no_words"]
    assert len(logged) == 1 and logged[0]["speech_ms"] == told["speech_ms"]
