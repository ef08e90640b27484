"""The page with a pipeline that greets (``[conversation] greeting``), in
Debian's chromium: the assistant speaks first, with no line of the user's
before it, and the conversation goes on from it."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.test_browser_page import CHROMIUM, CHROMIUM_ARGS, wait_for
from voice_membrane.server.server import Server

pytestmark = pytest.mark.anyio

GREETING = "Hello, this is the weather desk. What would you like to know?"
ANSWER = "Tomorrow, light rain in Paris."


def pipeline(folder: Path) -> Path:
    recording = folder / "reply.jsonl"
    header = {"format": "voice-membrane-replay", "version": 1}
    recording.write_text(json.dumps(header) + "\n" + json.dumps({"t_ms": 0, "text": ANSWER}))
    path = folder / "greets.toml"
    path.write_text(
        f'[llm]\nspec = "replay:{recording.name}"\n\n[tts]\nspec = "espeak"\n\n'
        f'[sink]\nkind = "null"\n\n[conversation]\ngreeting = "{GREETING}"\n'
    )
    return path


async def test_the_page_is_greeted_first_with_no_line_of_the_users(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: installed by scripts/system-packages.sh (as root)")
    from playwright.async_api import async_playwright

    async with (
        Server([pipeline(tmp_path)], port=0) as server,
        async_playwright() as playwright,
    ):
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            tab = await browser.new_page()
            problems: list[str] = []
            tab.on("pageerror", lambda error: problems.append(str(error)))
            with anyio.fail_after(60):
                await tab.goto(server.url + "/")
                # No message sent: the greeting is turn 1, played to its end.
                await wait_for(
                    tab,
                    "window.voiceMembrane.lastTurn?.turn === 1 && "
                    "window.voiceMembrane.state === 'idle' && !window.voiceMembrane.playing",
                )
                lines = await tab.eval_on_selector_all(
                    "#transcript li", "items => items.map(i => [i.className, i.hidden])"
                )
                user, reply = lines
                assert "user" in user[0] and user[1] is True  # no "You" line shown
                assert "reply" in reply[0] and reply[1] is False
                assert GREETING in await tab.inner_text("#transcript")
                await tab.fill("#message", "Weather tomorrow?")
                await tab.press("#message", "Enter")
                await wait_for(
                    tab,
                    "window.voiceMembrane.lastTurn?.turn === 2 && "
                    "window.voiceMembrane.state === 'idle'",
                )
                transcript = await tab.inner_text("#transcript")
                assert transcript.index(GREETING) < transcript.index("Weather tomorrow?")
                assert ANSWER in transcript
            assert problems == []
        finally:
            await browser.close()
