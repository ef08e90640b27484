"""Each turn's report says why the user's turn ended (issue 44, item 4): a
served session heard by the fake Deepgram (scripted words over real speech,
which Silero hears) reports a typed turn as ``typed``, a spoken one as
``silence`` (no end-of-turn model), and the words that interrupted the
answer as a ``barge_in`` turn; /metrics counts the turns by reason, and each
``turn_end`` log line says it (a phone call's only record)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from serve_helpers import LONG_REPLY, send, start, write_pipeline
from serve_voice_helpers import clip, silence, speak
from websockets.asyncio.client import connect

from voice_membrane.pipeline.listening import UserTurn
from voice_membrane.pipeline.voice_loop import VoiceToVoice, turn_end
from voice_membrane.server.server import Server
from voice_membrane.testing.fake_deepgram import FakeDeepgram
from voice_membrane.testing.transcript_script import TranscriptScript

KEY = "dg-test-" + "e" * 32
VOICE_IN = {"encoding": "pcm16", "sample_rate": 16000, "frame_ms": 20}


@pytest.fixture
def ears(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDeepgram]:
    scripts = (  # one per utterance: the question, then what interrupts the answer
        TranscriptScript.of("what is the weather like in paris", word_s=0.2),
        TranscriptScript.of("stop", word_s=0.2),
    )
    with FakeDeepgram(*scripts, api_key=KEY) as fake:
        monkeypatch.setenv("DEEPGRAM_API_KEY", KEY)
        monkeypatch.delenv("DEEPGRAM_BASE_URL", raising=False)
        yield fake


@pytest.mark.anyio
async def test_typed_spoken_and_barge_in_turns_say_why_they_ended(
    tmp_path: Path, ears: FakeDeepgram
) -> None:
    path = write_pipeline(tmp_path, "ears", LONG_REPLY)
    path.write_text(
        path.read_text() + f'\n[stt]\nspec = "deepgram:nova-3"\nbase_url = "{ears.base_url}"\n\n'
        '[endpoint]\necho = "aec"\n'
    )
    logged: list[dict[str, Any]] = []
    log = lambda event, **f: logged.append(f) if event == "turn_end" else None  # noqa: E731
    async with (
        Server([path], port=0, log=log) as server,
        connect(server.ws_url) as ws,
    ):
        await start(ws, pipeline="ears", input_audio=VOICE_IN)
        await send(ws, type="user.message", text="Hi!")
        got = await speak(ws, silence(0.0), until=lambda r: bool(r.of("turn.started")))
        await send(ws, type="interrupt")  # (the long answer need not play out)
        got = await speak(ws, silence(0.0), until=lambda r: r.turn_end(1) is not None)
        typed = next(e for e in got.of("metrics") if e["turn"] == 1)["report"]

        # The question, then the answer plays a while (past the echo warm-up).
        question = np.concatenate([silence(0.3), clip("weather")])
        await speak(ws, question, until=lambda r: len(r.frames) >= 200)
        # "stop" over it: the answer is interrupted, and "stop" is the next turn.
        got = await speak(ws, clip("stop"), until=lambda r: bool(r.of("turn.started")))
        await send(ws, type="interrupt")
        rest = await speak(ws, silence(0.0), until=lambda r: r.turn_end(3) is not None)
        reports = {e["turn"]: e["report"] for e in got.of("metrics") + rest.of("metrics")}
        metrics_text = server.state.metrics.render().decode()  # type: ignore[union-attr]

    assert (typed["endpoint_reason"], typed["barge_in"], typed["turn_model_ms"]) == (
        "typed",
        False,
        None,
    )
    spoken, barged = reports[2], reports[3]
    assert spoken["heard"]["text"] == "what is the weather like in paris"
    assert spoken["interrupted"] is True
    assert (spoken["endpoint_reason"], spoken["barge_in"], spoken["turn_model_ms"]) == (
        "silence",
        False,
        None,
    )
    assert barged["heard"]["text"] == "stop"
    assert (barged["endpoint_reason"], barged["barge_in"]) == ("silence", True)
    assert 'voice_membrane_turn_ends_total{reason="typed"} 1.0' in metrics_text
    assert 'voice_membrane_turn_ends_total{reason="silence"} 2.0' in metrics_text
    assert 'voice_membrane_turn_ends_total{reason="model"} 0.0' in metrics_text
    assert "voice_membrane_barge_in_turns_total 1.0" in metrics_text
    ends = {f["turn"]: (f["endpoint_reason"], f["barge_in"]) for f in logged}
    assert ends == {1: ("typed", False), 2: ("silence", False), 3: ("silence", True)}


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        ("model", "model"),
        ("silence", "silence"),
        ("final_timeout", "max_wait"),
        ("max_delay", "max_wait"),
        ("late", "late"),
    ],
)
def test_each_end_of_turn_reason_is_reported_as_the_metrics_say_it(reason: str, said: str) -> None:
    heard = UserTurn("four people", reason, 0, 1_000_000, None, 2_000_000, turn_model_ms=11.6)
    end = turn_end(heard, barge_in=True)
    assert end.to_dict() == {"endpoint_reason": said, "barge_in": True, "turn_model_ms": 11.6}
    line = VoiceToVoice(250.0, None, 260.0, 700.0).line(end)
    model = "12 ms" if said == "model" else "model 12 ms"  # (not "model (model …)")
    assert f"turn 250 ms by {said} ({model}), over the answer, → request" in line
