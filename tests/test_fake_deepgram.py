"""The fake Deepgram as the SDK sees it: the upgrade's checks, results paced by
the audio received (samples, not the clock: any chunking gives the same finals),
Finalize, UtteranceEnd, CloseStream's Metadata."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voice_membrane.stt.deepgram import DeepgramStt, _environment
from voice_membrane.testing.fake_deepgram import FakeDeepgram
from voice_membrane.testing.stt_drive import drive, speech
from voice_membrane.testing.transcript_script import TranscriptScript

KEY = "fake-deepgram-key"
SAID = TranscriptScript.of("one two three four five", finals_after=(1, 3))


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeDeepgram]:
    with FakeDeepgram(api_key=KEY) as server:
        yield server


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(chunk=st.integers(min_value=1, max_value=8000))
def test_any_chunking_gives_the_same_finals(fake: FakeDeepgram, chunk: int) -> None:
    fake.reset()
    fake.add(SAID)

    async def main() -> list[tuple[str, float, float]]:
        engine = DeepgramStt("nova-3", api_key=KEY, base_url=fake.ws_url)
        await engine.start()
        heard = await drive(engine, speech(3.0), chunk=chunk)
        assert heard.error is None
        return [(w.text, w.start_s, w.end_s) for f in heard.finals for w in f.words]

    words = anyio.run(main)
    assert words == [(w.text, w.start_s, w.end_s) for w in SAID.words]


def test_the_sdk_speaks_to_it_unchanged(fake: FakeDeepgram) -> None:
    """The SDK's own socket: Finalize → from_finalize result then UtteranceEnd;
    CloseStream → Metadata and a normal close; the auth header is checked."""
    fake.reset()
    fake.add(SAID)
    from deepgram import AsyncDeepgramClient

    async def main() -> list[dict[str, object]]:
        client = AsyncDeepgramClient(api_key=KEY, environment=_environment(fake.ws_url))
        got: list[dict[str, object]] = []
        async with client.listen.v1.connect(
            model="nova-3", encoding="linear16", sample_rate=16000, utterance_end_ms=1000
        ) as socket:
            await socket.send_media(speech(1.2).tobytes())
            await socket.send_finalize()
            await socket.send_close_stream()
            async for message in socket:
                got.append(message.dict())
        return got

    got = anyio.run(main)
    kinds = [m["type"] for m in got]
    assert kinds[-3:] == ["Results", "UtteranceEnd", "Metadata"]
    assert got[-3]["from_finalize"] is True and got[-1]["duration"] == 1.2
    assert fake.connections[-1].headers["authorization"] == f"Token {KEY}"
    assert fake.connections[-1].close_code == 1000
    assert json.dumps(fake.connections[-1].controls) == json.dumps(
        [{"type": "Finalize"}, {"type": "CloseStream"}]
    )


@pytest.mark.parametrize(
    ("query", "status"),
    [({"encoding": "opus"}, 400), ({"channels": 2}, 400)],
)
def test_options_it_cannot_honour_are_refused(
    fake: FakeDeepgram, query: dict[str, object], status: int
) -> None:
    fake.reset()
    from deepgram import AsyncDeepgramClient
    from deepgram.core.api_error import ApiError

    async def main() -> None:
        client = AsyncDeepgramClient(api_key=KEY, environment=_environment(fake.ws_url))
        options = {"model": "nova-3", "encoding": "linear16", "sample_rate": 16000, **query}
        async with client.listen.v1.connect(**options):  # type: ignore[arg-type]
            pass

    with pytest.raises(ApiError) as caught:
        anyio.run(main)
    assert caught.value.status_code == status
