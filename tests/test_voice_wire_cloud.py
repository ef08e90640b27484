"""A spoken conversation with barge-in over both wires against the cloud fakes
(Deepgram's live socket hears, OpenAI chat answers, ElevenLabs' socket speaks,
each through the vendor's own protocol on loopback): a phone call through the
fake Twilio caller, and the page in Chromium with a fake microphone."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.test_browser_mic import fake_mic_wav, launch, mic_flags, of_type, open_tab, until_event
from tests.test_browser_page import wait_for
from voice_membrane.listening.settings import EndpointSettings
from voice_membrane.server.server import Server
from voice_membrane.testing.fake_deepgram import FakeDeepgram
from voice_membrane.testing.fake_elevenlabs import FakeElevenLabs
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.fake_twilio import twilio_call
from voice_membrane.testing.script import ScriptedReply, text
from voice_membrane.testing.transcript_script import TranscriptScript

ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT / "audio_fixtures" / "speech"
HEARD = "what is the weather in paris today"
STOP_WORDS = "stop"
ANSWER = (
    "Paris today is mild and grey, with light rain in the morning. The clouds should "
    "break up a little after lunch, and the wind stays light from the west. In the "
    "evening the temperature falls to around nine degrees, so take a coat along."
)
SHORT = "All right, I will stop there."
KEY = "sk-test-" + "c" * 32
GUARD_S = 120  # against a hang on a loaded machine, not a timing check


@contextmanager
def cloud_pipeline(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Any]]:
    """The fakes running and a pipeline file on them (deepgram-voice.toml's shape)."""
    with ExitStack() as stack:
        ears = stack.enter_context(
            FakeDeepgram(
                TranscriptScript.of(HEARD, word_s=0.1, gap_s=0.02),
                TranscriptScript.of(STOP_WORDS, word_s=0.1, gap_s=0.02),
                api_key=KEY,
            )
        )
        brain = stack.enter_context(
            FakeOpenAI(ScriptedReply.of(text(ANSWER)), ScriptedReply.of(text(SHORT)))
        )
        voice = stack.enter_context(FakeElevenLabs())
        for name, value in {**ears.env(), **voice.env(), "OPENAI_API_KEY": KEY}.items():
            monkeypatch.setenv(name, value)
        path = folder / "cloud.toml"
        path.write_text(
            '[llm]\nspec = "openai:gpt-test"\nformatter = "native"\n'
            f'base_url = "{brain.base_url}"\n'
            'max_retries = 0\n\n[tts]\nspec = "elevenlabs:fake-voice"\n\n[sink]\nkind = "null"\n\n'
            f'[stt]\nspec = "deepgram:nova-3"\nbase_url = "{ears.base_url}"\n\n'
            '[endpoint]\necho = "aec"\n',
            encoding="utf-8",
        )
        yield path, (ears, brain, voice)


def asked(brain: FakeOpenAI) -> list[str]:
    return [json.dumps(r.body["messages"]) for r in brain.requests if isinstance(r.body, dict)]


@pytest.mark.anyio
async def test_a_phone_call_against_the_cloud_fakes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[tuple[str, dict[str, Any]]] = []
    with cloud_pipeline(tmp_path, monkeypatch) as (path, (_, brain, voice)):
        log = lambda event, **fields: lines.append((event, fields))  # noqa: E731
        async with Server([path], port=0, log=log) as server:
            url = server.ws_url.replace("/v1/session", "/v1/twilio")
            with anyio.fail_after(GUARD_S):
                async with twilio_call(url) as call:
                    await anyio.sleep(0.3)
                    question = await call.say(SPEECH / "phone" / "weather_paris.wav", 0.3)
                    warm = EndpointSettings().echo_warmup_s + 0.5
                    await call.wait_for(
                        lambda: (
                            sum(len(m.samples) for m in call.media_after(question.ended))
                            >= warm * 8000
                        ),
                        GUARD_S,
                    )
                    onset = time.perf_counter()
                    await call.say(SPEECH / "backchannels" / "stop.wav", 0.5)
                    await call.wait_for(lambda: call.first_clear_after(onset) is not None, GUARD_S)
                    while len([e for e, _ in lines if e == "turn_end"]) < 2:  # (the call is quiet)
                        await anyio.sleep(0.05)
        assert HEARD in asked(brain)[0]  # the chat model was asked what was heard
        assert STOP_WORDS in asked(brain)[1]
        # μ-law 8 kHz end to end: the voice was asked for the call's own format.
        assert {c.query["output_format"] for c in voice.connections} == {"ulaw_8000"}
    ends = [f for e, f in lines if e == "turn_end"]
    assert ends[0]["interrupted"] and not ends[1]["interrupted"]
    assert ends[0]["voice_to_voice"]["voice_to_voice_ms"] > 0
    actions = [f["action"] for e, f in lines if e == "barge_in"]
    assert "interrupt" in actions
    assert len(call.heard_audio()) < len(call.received_audio())  # the rest was cleared
    assert KEY not in json.dumps(lines)


@pytest.mark.anyio
async def test_the_page_against_the_cloud_fakes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import async_playwright

    wav = fake_mic_wav(tmp_path, second=SPEECH / "backchannels" / "stop.wav")
    with cloud_pipeline(tmp_path, monkeypatch) as (path, (_, brain, _)):
        async with (
            Server([path], port=0, log=lambda *a, **f: None) as server,
            async_playwright() as playwright,
        ):
            context = await launch(playwright, tmp_path, *mic_flags(wav))
            try:
                tab = await open_tab(context)
                with anyio.fail_after(GUARD_S):
                    await tab.goto(server.url + "/")
                    await tab.click("#start-mic")  # the page listens once asked to
                    final = await until_event(tab, lambda e: e["type"] == "transcript.final")
                    assert final["text"] == HEARD
                    turn = await until_event(tab, lambda e: e["type"] == "turn.started")
                    assert turn == {
                        "type": "turn.started",
                        "turn": 1,
                        "text": HEARD,
                        "source": "voice",
                    }
                    await wait_for(tab, "window.voiceMembrane.samplesPlayed > 24000")
                    end = await until_event(
                        tab, lambda e: e["type"] == "turn.end" and e["turn"] == 1
                    )
                    assert end["interrupted"] and ANSWER.startswith(end["heard"].strip())
                    assert {"type": "barge_in", "turn": 1, "action": "interrupt"}.items() <= next(
                        e for e in of_type(tab, "barge_in") if e["action"] == "interrupt"
                    ).items()
                    second = await until_event(
                        tab, lambda e: e["type"] == "turn.end" and e["turn"] == 2
                    )
                    assert second["heard"].strip() == SHORT
            finally:
                await context.close()
        assert HEARD in asked(brain)[0] and STOP_WORDS in asked(brain)[1]
