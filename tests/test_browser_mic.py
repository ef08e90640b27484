"""The page listens: Debian's chromium with a fake microphone playing a WAV made here
(a spoken question, a few seconds of silence, a second question that lands while the
answer plays), against an in-process server whose pipeline hears with Silero and
pocketsphinx, answers with a long recorded reply and speaks with espeak-ng.

The page listens once Start talking is clicked (tests/test_hostile_page_mic.py: not
before). Hands-free: the question's words show as they are recognized (partial, then
final), a voice turn starts and its answer is played, with its voice to voice on the
turn and its end-of-speech wait in the waterfall; the second question interrupts it.
The shipped local-voice pipeline (the default whisper hears, the embedded model
answers; espeak-ng and a short answer for speed) answers a spoken question.
Push-to-talk: the words held between press and release are the turn. Without a
microphone (denied, none, no AudioWorklet): one clear line, and typing still works;
a refused microphone shows Reconnect, which asks again once it is allowed.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import soundfile as sf

from tests.test_browser_page import CHROMIUM, CHROMIUM_ARGS, CSP_LISTENER, SCREENSHOT_ENV, wait_for
from tests.test_browser_page_app import assert_fits
from voice_membrane.server.server import Server

pytest.importorskip("pocketsphinx")
pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
# "What is the weather like in Paris today?", "How far is the moon"
QUESTION = ROOT / "audio_fixtures" / "listening" / "weather.wav"
SECOND = ROOT / "audio_fixtures" / "speech" / "questions" / "moon_distance.wav"
PHRASES = ["what is the weather like in paris today", "how far is the moon"]


def breaths() -> np.ndarray:
    """Five times the question's first 150 ms, faded out, 1.5 s apart: speech the
    detector hears (a pause) but never confirms (0.2 s), like a breath — no words,
    no turn. Five, over 6.6 s of the answer: the browser's noise suppression may
    swallow one, and on a loaded machine the answer starts late, so the first
    may fall in its echo warm-up (where speech alone does not pause it)."""
    question, _ = sf.read(QUESTION, dtype="int16")
    burst = question[: int(0.15 * 16000)].astype(np.float64)
    burst[-480:] *= np.linspace(1, 0, 480)
    gap = np.zeros(int(1.5 * 16000))
    return np.concatenate([burst] + [gap, burst] * 4).astype(np.int16)


LEAD_S = 1.0
# From the question's end to the second one: the end of the turn (~0.6 s), the
# transcript, the first audio, then past the first 3 s of the answer (the echo
# warm-up, where speech alone does not pause it).
GAP_S = 6.0
# The answer: long enough to be still playing when the second question comes.
ANSWER = " ".join(
    [
        "Paris today is mild and grey, with light rain in the morning.",
        "The clouds should break up a little after lunch, and the wind stays light from the west.",
        "In the evening the temperature falls to around nine degrees, so take a coat.",
        "Tomorrow looks brighter, with sunny spells and a high of sixteen degrees.",
        "The weekend stays dry, though Sunday may turn windy near the river.",
    ]
)
GUARD_S = 120  # a guard against a hang on a loaded machine, not a timing check


def shown_ms(ms: float) -> str:
    """A time as the page shows it: JavaScript's Math.round, half up."""
    return f"{math.floor(ms + 0.5)} ms"


def fake_mic_wav(
    folder: Path, lead_s: float = LEAD_S, second: Path | np.ndarray | None = SECOND
) -> Path:
    """What chromium's fake device plays (16-bit PCM WAV; it resamples it to the
    capture rate), once (%noloop): lead, question, gap, second question, silence."""
    question, rate = sf.read(QUESTION, dtype="int16")
    assert rate == 16000
    silence = lambda seconds: np.zeros(int(seconds * rate), dtype=np.int16)  # noqa: E731
    parts = [silence(lead_s), question, silence(GAP_S)]
    if isinstance(second, Path):
        the_second, rate2 = sf.read(second, dtype="int16")
        assert rate2 == rate
        parts.append(the_second)
    elif second is not None:
        parts.append(second)
    audio = np.concatenate([*parts, silence(40)])
    path = folder / "fake-mic.wav"
    sf.write(path, audio, rate, subtype="PCM_16")
    return path


def write_pipeline(folder: Path) -> Path:
    # pocketsphinx: these tests are about the page (mic, push to talk, barge-in), which
    # any recognizer serves; it settles in real time on a shared CPU where each whisper
    # decode costs ~0.5 s. The shipped pipeline's default is write_embedded_pipeline's.
    # With the page's two questions as its phrases: its general model, with the fake
    # microphone's audio on a loaded machine, once heard "… in a better student" for
    # "… in Paris today" (1 full suite in 3).
    recording = folder / "answer.jsonl"
    lines: list[dict[str, Any]] = [{"format": "voice-membrane-replay", "version": 1}]
    lines += [{"t_ms": 5 * i, "text": word + " "} for i, word in enumerate(ANSWER.split())]
    recording.write_text("".join(json.dumps(line) + "\n" for line in lines))
    pipeline = folder / "hear.toml"
    pipeline.write_text(
        'description = "pocketsphinx hears, a recording answers, espeak-ng speaks"\n\n'
        f'[llm]\nspec = "replay:{recording.name}"\n\n[tts]\nspec = "espeak"\n\n'
        '[sink]\nkind = "null"\n\n[stt]\nspec = "pocketsphinx"\n'
        f"phrases = {json.dumps(PHRASES)}\n\n"
        '[vad]\nengine = "silero"\n'
    )
    return pipeline


def write_embedded_pipeline(folder: Path) -> Path:
    """pipelines/local-voice.toml as it ships (the default whisper, Silero, the embedded
    model), but spoken by espeak-ng and with a short answer: fast enough for a test."""
    text = (ROOT / "pipelines" / "local-voice.toml").read_text()
    text = text.replace('spec = "piper"', 'spec = "espeak"').replace(
        "max_tokens = 200", "max_tokens = 24"
    )
    text = re.sub(r"\[sink\][^\[]*", '[sink]\nkind = "null"\n\n', text)
    assert 'spec = "espeak"' in text and "max_tokens = 24" in text and 'kind = "null"' in text
    pipeline = folder / "local-voice.toml"
    pipeline.write_text(text)
    return pipeline


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with Server([write_pipeline(tmp_path)], port=0) as running:
        yield running


def mic_flags(wav: Path) -> tuple[str, ...]:
    """Chromium's flags for a microphone that plays ``wav`` once, with no prompt."""
    return (
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={wav}%noloop",
    )


async def launch(playwright: Any, folder: Path, *args: str) -> Any:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: installed by scripts/system-packages.sh (as root)")
    return await playwright.chromium.launch_persistent_context(
        folder / "chromium-profile",
        executable_path=str(CHROMIUM),
        headless=True,
        args=[*CHROMIUM_ARGS, *args],
        viewport={"width": 900, "height": 700},
    )


async def open_tab(context: Any, *init_scripts: str) -> Any:
    """A tab whose server events are recorded (``tab.events``) and whose errors and
    policy violations fail the test (``check``)."""
    await context.add_init_script(CSP_LISTENER)
    for script in init_scripts:
        await context.add_init_script(script)
    tab = await context.new_page()
    tab.problems = []
    tab.events = []
    tab.sent = []
    tab.on("pageerror", lambda error: tab.problems.append(str(error)))
    tab.on(
        "console",
        lambda m: tab.problems.append(m.text) if "Content Security Policy" in m.text else None,
    )

    def socket(ws: Any) -> None:
        ws.on("framereceived", lambda payload: record(tab.events, payload))
        ws.on("framesent", lambda payload: tab.sent.append(payload))

    tab.on("websocket", socket)
    return tab


def record(events: list[dict[str, Any]], payload: str | bytes) -> None:
    if isinstance(payload, str):
        events.append(json.loads(payload))


async def check(tab: Any) -> None:
    assert tab.problems == [], tab.problems
    assert await tab.evaluate("window.__cspViolations") == []


def of_type(tab: Any, *types: str) -> list[dict[str, Any]]:
    return [e for e in tab.events if e["type"] in types]


async def until_event(tab: Any, predicate: Any) -> dict[str, Any]:
    while True:
        for event in tab.events:
            if predicate(event):
                return event  # type: ignore[no-any-return]
        await anyio.sleep(0.05)


async def test_hands_free_the_question_is_heard_answered_and_the_second_interrupts(
    server: Server, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    wav = fake_mic_wav(tmp_path)
    async with async_playwright() as playwright:
        context = await launch(playwright, tmp_path, *mic_flags(wav))
        try:
            tab = await open_tab(context)
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/")
                # Listening once asked to: the session took the page's input audio.
                await tab.click("#start-mic")
                await wait_for(tab, "window.voiceMembrane.mic.state === 'on'")
                (started,) = of_type(tab, "session.started")
                assert started["input_audio"] == {
                    "encoding": "pcm16",
                    "sample_rate": 16000,
                    "frame_ms": 20,
                }
                assert started["turn_taking"] == "vad"
                assert await tab.is_visible("#mic") and await tab.is_visible("#talk")
                assert await tab.is_hidden("#mic-note")

                # The words show as they are recognized: dimmed first, then solid.
                await wait_for(
                    tab, "document.querySelector('#transcript li.live .partial')?.textContent"
                )
                dimmed = await tab.evaluate(
                    "(() => { const s = getComputedStyle("
                    "document.querySelector('#transcript li.live .partial'));"
                    " return [s.fontStyle, s.color]; })()"
                )
                solid = await tab.evaluate(
                    "getComputedStyle(document.querySelector('#transcript li.live')).color"
                )
                assert dimmed[0] == "italic" and dimmed[1] != solid
                await wait_for(tab, "window.voiceMembrane.mic.level > 0")
                final = await until_event(tab, lambda e: e["type"] == "transcript.final")
                assert "weather" in final["text"] and "paris" in final["text"].lower()
                kinds = [e["type"] for e in of_type(tab, "transcript.partial", "transcript.final")]
                assert kinds.index("transcript.partial") < kinds.index("transcript.final")
                assert of_type(tab, "vad.speech_start")

                # The voice turn: what was heard is the user's line, and the answer plays.
                turn = await until_event(tab, lambda e: e["type"] == "turn.started")
                assert turn["source"] == "voice" and "weather" in turn["text"]
                await wait_for(
                    tab, "document.querySelector('#transcript li.user[data-source=voice]')"
                )
                user = await tab.inner_text("#transcript li.user[data-source=voice]")
                assert "weather" in user
                await wait_for(tab, "window.voiceMembrane.outputPeak() > 0.05")
                await wait_for(tab, "window.voiceMembrane.playedSeconds() > 1.0")

                # Every binary frame the page sent is 20 ms of 16 kHz pcm16, raw.
                audio = [len(p) for p in tab.sent if isinstance(p, bytes)]
                assert audio and set(audio) == {640}

                # The second question, over the answer, interrupts it.
                end = await until_event(
                    tab, lambda e: e["type"] == "turn.end" and e["turn"] == turn["turn"]
                )
                assert end["interrupted"] is True

                # Voice to voice, the headline figure, on the turn: the server's, to the ms.
                metrics = await until_event(
                    tab, lambda e: e["type"] == "metrics" and e["turn"] == turn["turn"]
                )
                latency = metrics["report"]["voice_to_voice"]
                reply = f'#transcript li.reply[data-turn="{turn["turn"]}"]'
                badge = await tab.text_content(f"{reply} .badge.v2v")
                assert badge == f"voice to voice {shown_ms(latency['voice_to_voice_ms'])}"
                # The waterfall counts from the end of speech: the end-of-speech wait
                # (endpointing) first, the first audio at voice to voice.
                figure = f'.waterfall[data-turn="{turn["turn"]}"]'
                rows = await tab.eval_on_selector_all(
                    f"{figure} tr[data-stamp]",
                    "rows => rows.map(r => [r.dataset.stamp, r.querySelector('.ms').textContent])",
                )
                assert rows[0] == ["endpointing", shown_ms(latency["endpointing_ms"])]
                assert dict(rows)["first_audio"] == shown_ms(latency["voice_to_voice_ms"])
                assert dict(rows)["request_sent"] == shown_ms(latency["request_ms"])
                caption = await tab.text_content(f"{figure} figcaption")
                assert f"voice to voice {shown_ms(latency['voice_to_voice_ms'])}" in caption
                actions = [e["action"] for e in of_type(tab, "barge_in")]
                assert "interrupt" in actions, actions
                second = await until_event(
                    tab, lambda e: e["type"] == "turn.started" and e["turn"] > turn["turn"]
                )
                assert second["source"] == "voice" and "moon" in second["text"]
                first = await tab.evaluate(f"window.voiceMembrane.turn({turn['turn']})")
                assert first["interrupted"] is True
                assert first["heard"] and ANSWER.startswith(first["heard"].strip())
                assert len(first["heard"]) < len(ANSWER) // 2
                note = await tab.inner_text(
                    f'#transcript li.reply[data-turn="{turn["turn"]}"] .note'
                )
                assert "interrupted" in note
                # The interrupted answer's held audio was dropped, not left in the
                # player (paused, it would hold up the next answer): the second
                # question's answer plays.
                await wait_for(tab, f"window.voiceMembrane.turn({second['turn']})?.frames > 0")
                played = await tab.evaluate("window.voiceMembrane.samplesPlayed")
                await wait_for(tab, f"window.voiceMembrane.samplesPlayed > {played + 16000}")
                assert await tab.evaluate("window.voiceMembrane.paused") is False

                # The controls fit beside the mic's on a phone.
                for width in (375, 320):
                    await tab.set_viewport_size({"width": width, "height": 700})
                    await assert_fits(tab, {"talk", "mic-mute", "talk-mode", "message", "send"})
                shot = os.environ.get(SCREENSHOT_ENV)
                if shot:  # with the details open: the spoken turn's waterfall
                    await tab.set_viewport_size({"width": 1280, "height": 800})
                    await tab.click("#details > summary")
                    await tab.screenshot(
                        path=str(Path(shot).with_stem(Path(shot).stem + "-mic")), full_page=True
                    )
                # Muted: the mic sends frames of silence (the server's clock runs on).
                sent = await tab.evaluate("window.voiceMembrane.mic.framesSent")
                await tab.click("#mic-mute")
                assert await tab.evaluate("window.voiceMembrane.mic.open") is False
                await wait_for(tab, f"window.voiceMembrane.mic.framesSent > {sent + 10}")
            await check(tab)
        finally:
            await context.close()


async def test_a_breath_over_the_answer_pauses_it_where_it_is_then_it_plays_on(
    server: Server, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    wav = fake_mic_wav(tmp_path, second=breaths())
    async with async_playwright() as playwright:
        context = await launch(playwright, tmp_path, *mic_flags(wav))
        try:
            tab = await open_tab(context)
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/")
                await tab.click("#start-mic")
                turn = await until_event(tab, lambda e: e["type"] == "turn.started")
                # Paused, the player holds its audio where it is: from the pause to
                # the resume (at least 0.25 s later) it plays nothing (the player
                # reports what it played every ~43 ms); then it plays on. No words,
                # no turn.
                await until_event(
                    tab, lambda e: e["type"] == "barge_in" and e["action"] == "resume"
                )
                await wait_for(tab, "window.voiceMembrane.mic.bargeIns.length >= 2")
                pause, resume = (await tab.evaluate("window.voiceMembrane.mic.bargeIns"))[:2]
                assert (pause["action"], resume["action"]) == ("pause", "resume")
                rate = await tab.evaluate("window.voiceMembrane.sampleRate")
                assert resume["played"] - pause["played"] < 0.1 * rate
                held = resume["played"]
                await wait_for(tab, f"window.voiceMembrane.samplesPlayed > {held + 16000}")
                assert not of_type(tab, "turn.end")
                assert [e["turn"] for e in of_type(tab, "turn.started")] == [turn["turn"]]
                assert await tab.evaluate("window.voiceMembrane.turn(1).interrupted") is False
            await check(tab)
        finally:
            await context.close()


async def test_the_embedded_pipeline_answers_a_spoken_question(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from playwright.async_api import async_playwright

    pytest.importorskip("faster_whisper")  # the shipped pipeline hears with the default
    wav = fake_mic_wav(tmp_path, second=None)
    async with (
        Server([write_embedded_pipeline(tmp_path)], port=0) as server,
        async_playwright() as playwright,
    ):
        context = await launch(playwright, tmp_path, *mic_flags(wav))
        try:
            tab = await open_tab(context)
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/")
                await tab.click("#start-mic")
                turn = await until_event(tab, lambda e: e["type"] == "turn.started")
                assert turn["source"] == "voice" and "weather" in turn["text"]
                end = await until_event(tab, lambda e: e["type"] == "turn.end")
                assert end["interrupted"] is False and end["heard"]
                await wait_for(
                    tab,
                    "window.voiceMembrane.samplesPlayed === window.voiceMembrane.samplesScheduled"
                    " && window.voiceMembrane.samplesPlayed > 8000",
                )
                reply = await tab.inner_text(
                    f'#transcript li.reply[data-turn="{turn["turn"]}"] .text'
                )
                assert reply.strip() == end["heard"].strip()
            await check(tab)
        finally:
            await context.close()


async def test_push_to_talk_only_the_words_held_are_a_turn(server: Server, tmp_path: Path) -> None:
    from playwright.async_api import async_playwright

    lead_s = 2.0  # room to press before the question starts
    wav = fake_mic_wav(tmp_path, lead_s)
    async with async_playwright() as playwright:
        context = await launch(playwright, tmp_path, *mic_flags(wav))
        try:
            tab = await open_tab(context)
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/?turn_taking=push_to_talk")
                await tab.click("#start-mic")
                await wait_for(tab, "window.voiceMembrane.mic.state === 'on'")
                (started,) = of_type(tab, "session.started")
                assert started["turn_taking"] == "push_to_talk"
                assert await tab.input_value("#talk-mode") == "push_to_talk"
                # Not held: the mic sends silence (its first frames seen before the press).
                assert await tab.evaluate("window.voiceMembrane.mic.open") is False
                while not any(isinstance(p, bytes) for p in tab.sent):
                    await anyio.sleep(0.02)

                # Hold Space (not in the text field, where it types) over the question.
                await tab.evaluate("document.activeElement.blur()")
                await tab.keyboard.down("Space")
                assert await tab.get_attribute("#talk", "aria-pressed") == "true"
                assert await tab.evaluate("window.voiceMembrane.mic.open") is True
                await anyio.sleep(lead_s + 2.5)  # the question is ~1.9 s
                await tab.keyboard.up("Space")
                assert await tab.evaluate("window.voiceMembrane.mic.open") is False
                texts = [json.loads(p)["type"] for p in tab.sent if isinstance(p, str)]
                assert texts.count("input.start") == 1 and texts.count("input.end") == 1
                assert texts.index("input.start") < texts.index("input.end")

                turn = await until_event(tab, lambda e: e["type"] == "turn.started")
                assert turn["source"] == "voice" and "weather" in turn["text"]
                await wait_for(tab, "window.voiceMembrane.playedSeconds() > 1.0")
                # The second question plays while nothing is held: it is no turn and
                # does not stop the answer.
                await wait_for(tab, "window.voiceMembrane.playedSeconds() > 10.0")
                assert [e["turn"] for e in of_type(tab, "turn.started")] == [turn["turn"]]
                assert not [e for e in of_type(tab, "transcript.final") if "moon" in e["text"]]
                assert not of_type(tab, "turn.end")
                # Only the hold carried sound: before it and after it (the second
                # question), frames of silence.
                kinds = [p if isinstance(p, bytes) else json.loads(p)["type"] for p in tab.sent]
                pressed, released = kinds.index("input.start"), kinds.index("input.end")
                frames = [(i, p) for i, p in enumerate(kinds) if isinstance(p, bytes)]
                in_flight = 5  # frames made before the gate's message reached the worklet
                before = [p for i, p in frames if i < pressed]
                held = [p for i, p in frames if pressed < i < released]
                after = [p for i, p in frames if i > released][in_flight:]
                assert before and not any(any(p) for p in before)
                assert sum(1 for p in held if any(p)) > 50  # the question
                assert len(after) > 300 and not any(any(p) for p in after)
            await check(tab)
        finally:
            await context.close()


# Why the page cannot listen, made three ways: the permission refused, no device
# (getUserMedia's NotFoundError, as on a machine with no microphone), no AudioWorklet.
NO_DEVICE = """
navigator.mediaDevices.getUserMedia = () =>
  Promise.reject(new DOMException('Requested device not found', 'NotFoundError'));
"""
NO_WORKLET = """
delete window.AudioWorkletNode;
Object.defineProperty(BaseAudioContext.prototype, 'audioWorklet', { get: () => undefined });
"""


@pytest.mark.parametrize(
    ("flags", "script", "says", "asked"),
    [
        (("--deny-permission-prompts", "--use-fake-device-for-media-stream"), "", "blocked", True),
        (("--use-fake-ui-for-media-stream",), NO_DEVICE, "No microphone was found", True),
        (("--use-fake-ui-for-media-stream",), NO_WORKLET, "no AudioWorklet", False),
    ],
    ids=["denied", "no-device", "no-worklet"],
)
async def test_without_a_microphone_one_line_says_why_and_typing_works(
    server: Server, tmp_path: Path, flags: tuple[str, ...], script: str, says: str, asked: bool
) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        context = await launch(playwright, tmp_path, *flags)
        try:
            tab = await open_tab(context, *([script] if script else []))
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/")
                await wait_for(tab, "window.voiceMembrane.state === 'idle'")
                if asked:  # where the page can capture, it asks on the click
                    await tab.click("#start-mic")
                await wait_for(tab, "!document.getElementById('mic-note').hidden")
                line = await tab.inner_text("#mic-note")
                assert says in line and "Typing still works." in line
                assert "\n" not in line.strip()
                (started,) = of_type(tab, "session.started")
                # The page asks for input audio only where it can capture it.
                assert (started["input_audio"] is not None) is asked
                assert await tab.is_hidden("#talk") and await tab.is_hidden("#mic")
                assert await tab.is_hidden("#start-mic")
                # Where asking again may help, the line's Reconnect is there to press.
                assert await tab.is_visible("#mic-retry") is asked
                if asked:
                    assert "press Reconnect" in line
                assert await tab.is_hidden("#error")
                assert not [p for p in tab.sent if isinstance(p, bytes)]

                await tab.fill("#message", "What's the weather in Paris?")
                await tab.press("#message", "Enter")
                turn = await until_event(tab, lambda e: e["type"] == "turn.started")
                assert turn["source"] == "text"
                await wait_for(tab, "window.voiceMembrane.playedSeconds() > 0.5")
                await tab.keyboard.press("Escape")
                await wait_for(tab, "window.voiceMembrane.state === 'idle'")
                assert await tab.inner_text("#mic-note") == line  # still said
            await check(tab)
        finally:
            await context.close()


async def test_a_refused_microphone_shows_reconnect_which_listens_once_allowed(
    server: Server, tmp_path: Path
) -> None:
    """The permission refused: the line says press Reconnect, and the button is there;
    the user allows the microphone, presses it, and is heard."""
    from playwright.async_api import async_playwright

    wav = fake_mic_wav(tmp_path, second=None)
    async with async_playwright() as playwright:
        context = await launch(
            playwright,
            tmp_path,
            "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={wav}%noloop",
        )
        try:
            tab = await open_tab(context)
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/")
                await wait_for(tab, "window.voiceMembrane.state === 'idle'")
                await tab.click("#start-mic")
                await wait_for(tab, "window.voiceMembrane.mic.state === 'failed'")
                line = await tab.inner_text("#mic-note")
                assert "blocked" in line and "press Reconnect" in line
                assert await tab.is_visible("#mic-retry")
                assert await tab.inner_text("#mic-retry") == "Reconnect"
                assert not [p for p in tab.sent if isinstance(p, bytes)]

                await context.grant_permissions(["microphone"], origin=server.url)
                await tab.click("#mic-retry")
                await wait_for(tab, "window.voiceMembrane.mic.state === 'on'")
                assert await tab.is_hidden("#mic-retry") and await tab.is_hidden("#mic-note")
                assert await tab.is_visible("#mic")
                # The same session, heard: the question is its first turn.
                turn = await until_event(tab, lambda e: e["type"] == "turn.started")
                assert turn["source"] == "voice" and "weather" in turn["text"]
                assert len(of_type(tab, "session.started")) == 1
            await check(tab)
        finally:
            await context.close()
