"""The page says why a spoken turn ended and when speech had no words (issue 44,
item 4): Debian's chromium with a fake microphone (the weather question twice,
a pause between) against an in-process server hearing with Silero and the fake
Deepgram, which makes no words of the first and the question of the second.
The first is one dimmed line in the transcript (the ``no_words`` event); the
second is a voice turn whose details (its waterfall) say it ended on the end
silence; a typed turn's say nothing of it; the model's turns and a barge-in
are said as the page's own function says them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf

from tests.test_browser_mic import (
    GUARD_S,
    QUESTION,
    check,
    launch,
    mic_flags,
    of_type,
    open_tab,
    until_event,
)
from tests.test_browser_page import wait_for
from voice_membrane.server.server import Server
from voice_membrane.testing.fake_deepgram import FakeDeepgram
from voice_membrane.testing.transcript_script import TranscriptScript

pytestmark = pytest.mark.anyio

KEY = "dg-test-" + "f" * 32
HEARD = "what is the weather like in paris"


@pytest.fixture
def ears(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDeepgram]:
    # One script per utterance: no words for the first, the question for the second.
    scripts = (TranscriptScript(), TranscriptScript.of(HEARD, word_s=0.2))
    with FakeDeepgram(*scripts, api_key=KEY) as fake:
        monkeypatch.setenv("DEEPGRAM_API_KEY", KEY)
        monkeypatch.delenv("DEEPGRAM_BASE_URL", raising=False)
        yield fake


def pipeline(folder: Path, stt_url: str) -> Path:
    recording = folder / "answer.jsonl"
    lines: list[dict[str, Any]] = [{"format": "voice-membrane-replay", "version": 1}]
    lines += [{"t_ms": 5 * i, "text": w + " "} for i, w in enumerate(["It", "is", "mild."])]
    recording.write_text("".join(json.dumps(line) + "\n" for line in lines))
    path = folder / "ears.toml"
    path.write_text(
        f'[llm]\nspec = "replay:{recording.name}"\n\n[tts]\nspec = "espeak"\n\n'
        '[sink]\nkind = "null"\n\n'
        f'[stt]\nspec = "deepgram:nova-3"\nbase_url = "{stt_url}"\n\n[vad]\nengine = "silero"\n'
    )
    return path


def fake_mic(folder: Path) -> Path:
    """The question twice, 2 s apart, then silence: once (%noloop)."""
    question, rate = sf.read(QUESTION, dtype="int16")
    silence = lambda seconds: np.zeros(int(seconds * rate), dtype=np.int16)  # noqa: E731
    audio = np.concatenate([silence(0.5), question, silence(2.0), question, silence(40)])
    path = folder / "fake-mic.wav"
    sf.write(path, audio, rate, subtype="PCM_16")
    return path


async def test_no_words_is_a_dimmed_line_and_the_details_say_why_a_turn_ended(
    tmp_path: Path, ears: FakeDeepgram
) -> None:
    from playwright.async_api import async_playwright

    wav = fake_mic(tmp_path)
    async with (
        Server([pipeline(tmp_path, ears.base_url)], port=0) as server,
        async_playwright() as playwright,
    ):
        context = await launch(playwright, tmp_path, *mic_flags(wav))
        try:
            tab = await open_tab(context)
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/")
                await tab.click("#start-mic")
                await wait_for(tab, "window.voiceMembrane.mic.state === 'on'")

                # The first question made no words: one dimmed line says so.
                told = await until_event(tab, lambda e: e["type"] == "no_words")
                notice = "#transcript li.notice.no-words"
                await wait_for(tab, f"document.querySelector('{notice}')")
                text = await tab.inner_text(notice)
                pattern = r"(\d+\.\d) s of sound had no words in it \(.*\): no turn"
                shown = re.fullmatch(pattern, text)
                assert shown, text  # the event's speech_ms, to a tenth of a second
                assert abs(float(shown.group(1)) - told["speech_ms"] / 1000) <= 0.05 + 1e-9
                style = await tab.evaluate(
                    f"(() => {{ const s = getComputedStyle(document.querySelector('{notice}'));"
                    " return [s.fontStyle, s.color,"
                    " getComputedStyle(document.querySelector('#transcript')).color]; })()"
                )
                assert style[0] == "italic" and style[1] != style[2], style

                # The second is a voice turn; its details say the end silence ended it.
                turn = await until_event(tab, lambda e: e["type"] == "turn.started")
                assert turn["source"] == "voice" and turn["text"] == HEARD
                metrics = await until_event(tab, lambda e: e["type"] == "metrics")
                assert metrics["report"]["endpoint_reason"] == "silence"
                ended = f'.waterfall[data-turn="{turn["turn"]}"] .ended'
                await wait_for(tab, f"document.querySelector('{ended}')")
                assert await tab.get_attribute(ended, "data-reason") == "silence"
                assert await tab.get_attribute(ended, "data-barge-in") == "false"
                said = await tab.text_content(ended)  # (in the details, closed)
                assert said == "Turn ended: the end silence ran out (silence)"
                status = await tab.evaluate(f"window.voiceMembrane.turn({turn['turn']})")
                assert (status["endpointReason"], status["bargeIn"]) == ("silence", False)
                await wait_for(tab, "window.voiceMembrane.state === 'idle'")

                # A typed turn: nothing was listened for, its details say nothing of it.
                await tab.fill("#message", "And tomorrow?")
                await tab.press("#message", "Enter")
                typed = await until_event(
                    tab, lambda e: e["type"] == "metrics" and e["turn"] > turn["turn"]
                )
                assert typed["report"]["endpoint_reason"] == "typed"
                figure = f'.waterfall[data-turn="{typed["turn"]}"]'
                await wait_for(tab, f"document.querySelector('{figure}')")
                assert await tab.query_selector(f"{figure} .ended") is None
                assert len(of_type(tab, "no_words")) == 1

                # The model's turns, and a barge-in, as the details say them.
                said = await tab.evaluate(
                    """async () => {
                      const { endedBy } = await import('/static/waterfall.js');
                      return [
                        endedBy({endpoint_reason: 'model', turn_model_ms: 13.6, barge_in: true}),
                        endedBy({endpoint_reason: 'max_wait', turn_model_ms: null}),
                        endedBy({endpoint_reason: 'silence', turn_model_ms: 9.2}),
                        endedBy({endpoint_reason: 'constructor'}),
                      ];
                    }"""
                )
                assert said == [
                    "Turn ended: the end-of-turn model judged you done (model, 14 ms); "
                    "your words interrupted the answer (barge-in)",
                    "Turn ended: the wait for the transcript ran out (max_wait)",
                    "Turn ended: the end silence ran out (silence, model 9 ms)",
                    None,
                ]
            await check(tab)
        finally:
            await context.close()
