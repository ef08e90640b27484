"""The page's microphone opens only on a click in the page, every load (issue 42,
item 8): Debian's chromium with the microphone permission already granted (the
worst case: a user who allowed it once) and a fake device, against an in-process
server whose pipeline listens.

Loaded, the page asks for no microphone and sends no audio frame until Start
talking is clicked; opened by another site (``window.open`` from a page of another
origin, after the user had clicked Start talking in a tab of their own), it does
not listen either: the choice is not remembered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.test_browser_mic import (
    GUARD_S,
    check,
    fake_mic_wav,
    launch,
    mic_flags,
    open_tab,
    write_pipeline,
)
from tests.test_browser_page import framing_site, wait_for
from voice_membrane.server.server import Server

pytest.importorskip("pocketsphinx")
pytestmark = pytest.mark.anyio

# Counts, in every page of the context, the asks for the microphone and the binary
# (audio) messages sent on any WebSocket: the test's view of what the page did.
COUNTERS = """
window.__micAsks = 0;
window.__audioFrames = 0;
const ask = navigator.mediaDevices && navigator.mediaDevices.getUserMedia;
if (ask) {
  navigator.mediaDevices.getUserMedia = function (...args) {
    window.__micAsks += 1;
    return ask.apply(this, args);
  };
}
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (data) {
  if (typeof data !== 'string') window.__audioFrames += 1;
  return send.call(this, data);
};
"""
# Long enough for a page that listens at once to have asked and sent frames (it
# did within ~0.3 s of its session starting: 20 ms frames, 50 a second).
SETTLE_S = 2.0


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with Server([write_pipeline(tmp_path)], port=0) as running:
        yield running


async def granted(playwright: Any, folder: Path) -> Any:
    """A browser where the microphone is allowed and a device plays the question."""
    wav = fake_mic_wav(folder, second=None)
    return await launch(playwright, folder, *mic_flags(wav))


async def assert_not_listening(tab: Any) -> None:
    """The session accepted the page's audio, yet nothing was asked or sent."""
    await wait_for(tab, "window.voiceMembrane?.state === 'idle'")
    assert (await tab.evaluate("window.voiceMembrane.mic.inputAudio")) is not None
    await anyio.sleep(SETTLE_S)
    assert await tab.evaluate("window.__micAsks") == 0
    assert await tab.evaluate("window.__audioFrames") == 0
    assert await tab.evaluate("window.voiceMembrane.mic.state") == "ready"
    assert await tab.is_visible("#start-mic")
    assert await tab.is_hidden("#mic")


async def test_the_page_sends_no_audio_until_start_talking_is_clicked(
    server: Server, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        context = await granted(playwright, tmp_path)
        try:
            tab = await open_tab(context, COUNTERS)
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/")
                await assert_not_listening(tab)
                assert not [p for p in tab.sent if isinstance(p, bytes)]

                await tab.click("#start-mic")
                await wait_for(tab, "window.voiceMembrane.mic.state === 'on'")
                await wait_for(tab, "window.__audioFrames > 10")
                assert await tab.evaluate("window.__micAsks") == 1
                assert await tab.is_hidden("#start-mic")
                assert await tab.is_visible("#mic") and await tab.is_visible("#mic-mute")
            await check(tab)
        finally:
            await context.close()


async def test_a_page_opened_by_another_site_does_not_listen(
    server: Server, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    opener = f"<button id=go onclick=\"window.open('{server.url}/')\">go</button>"
    async with async_playwright() as playwright:
        context = await granted(playwright, tmp_path)
        try:
            with anyio.fail_after(GUARD_S), framing_site(opener) as other:
                # The user talked to the page once, in a tab of their own.
                own = await open_tab(context, COUNTERS)
                await own.goto(server.url + "/")
                await own.click("#start-mic")
                await wait_for(own, "window.__audioFrames > 10")
                await own.close()

                # Another site opens it (on a click of the user's on that site).
                site = await context.new_page()
                await site.goto(other)
                async with context.expect_page() as opened:
                    await site.click("#go")
                popup = await opened.value
                assert popup.url.startswith(server.url)
                await assert_not_listening(popup)
                await site.close()
        finally:
            await context.close()
