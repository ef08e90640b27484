"""The page over WebRTC: Debian's chromium with a fake microphone (a spoken
question, then a second one while the answer plays) against an in-process
server that offers WebRTC. The page takes the WebRTC route, the question is
heard from its audio track and answered on the server's, the answer plays
through the page's output chain, and the second question interrupts it. A
server without WebRTC gets the same page over the WebSocket (the fallback). A
server with a token: the offer's 401 asks for it, as the WebSocket's 4401 does,
and the token goes with the next offer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from webrtc_helpers import loopback_ice

from tests.test_browser_mic import (
    GUARD_S,
    fake_mic_wav,
    launch,
    mic_flags,
    open_tab,
    write_pipeline,
)
from tests.test_browser_page import wait_for
from voice_membrane.server.server import Server

pytest.importorskip("aiortc")
pytest.importorskip("pocketsphinx")
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("loopback_ice")]
__all__ = ["loopback_ice"]


async def _logged(logs: list[tuple[str, dict[str, Any]]], match: Any) -> dict[str, Any]:
    while True:
        for kind, fields in logs:
            if match(kind, fields):
                return fields
        await anyio.sleep(0.05)


async def test_the_page_talks_over_webrtc_and_barge_in_works(tmp_path: Path) -> None:
    from playwright.async_api import async_playwright

    logs: list[tuple[str, dict[str, Any]]] = []
    wav = fake_mic_wav(tmp_path)
    log = lambda kind, **fields: logs.append((kind, fields))  # noqa: E731
    async with (
        Server([write_pipeline(tmp_path)], port=0, log=log, webrtc=True) as server,
        async_playwright() as playwright,
    ):
        context = await launch(playwright, tmp_path, *mic_flags(wav))
        try:
            tab = await open_tab(context)
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/")
                await wait_for(tab, "window.voiceMembrane.state === 'idle'")
                assert await tab.evaluate("window.voiceMembrane.transport") == "webrtc"
                assert tab.events == []  # no WebSocket: the events are on the data channel
                await tab.click("#start-mic")
                await wait_for(tab, "window.voiceMembrane.mic.state === 'on'")

                turn = await _logged(
                    logs, lambda k, f: k == "turn_start" and f["source"] == "voice"
                )
                await wait_for(
                    tab, "document.querySelector('#transcript li.user[data-source=voice]')"
                )
                assert "weather" in await tab.inner_text("#transcript li.user[data-source=voice]")
                # The answer plays: on the track, and out of the page's output chain.
                await wait_for(tab, "window.voiceMembrane.outputPeak() > 0.05")
                stats = await tab.evaluate("window.voiceMembrane.rtcAudio()")
                assert stats["received"] > 48000  # over a second of it

                # The second question, over the answer, interrupts it.
                end = await _logged(
                    logs, lambda k, f: k == "turn_end" and f["turn"] == turn["turn"]
                )
                assert end["interrupted"] is True
                barge = await _logged(logs, lambda k, f: k == "barge_in")
                assert barge["turn"] == turn["turn"]
                await wait_for(tab, f"window.voiceMembrane.turn({turn['turn']})?.interrupted")
                await _logged(logs, lambda k, f: k == "turn_start" and f["turn"] > turn["turn"])
            assert tab.problems == [] and await tab.evaluate("window.__cspViolations") == []
        finally:
            await context.close()


async def test_a_server_without_webrtc_gets_the_page_over_the_websocket(tmp_path: Path) -> None:
    from playwright.async_api import async_playwright

    async with (
        Server([write_pipeline(tmp_path)], port=0, log=lambda *a, **f: None) as server,
        async_playwright() as playwright,
    ):
        context = await launch(playwright, tmp_path)
        try:
            tab = await open_tab(context)
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/")
                await wait_for(tab, "window.voiceMembrane.state === 'idle'")
                assert await tab.evaluate("window.voiceMembrane.transport") == "websocket"
                assert [e["type"] for e in tab.events][:1] == ["session.started"]
                await tab.fill("#message", "Hello")
                await tab.click("#send")
                await wait_for(tab, "window.voiceMembrane.outputPeak() > 0.05")
        finally:
            await context.close()


async def test_a_token_over_webrtc_is_asked_for_then_sent_with_the_offer(tmp_path: Path) -> None:
    from playwright.async_api import async_playwright

    token = "a-token-of-24-characters"
    logs: list[tuple[str, dict[str, Any]]] = []
    log = lambda kind, **fields: logs.append((kind, fields))  # noqa: E731
    async with (
        Server([write_pipeline(tmp_path)], port=0, log=log, webrtc=True, token=token) as server,
        async_playwright() as playwright,
    ):
        context = await launch(playwright, tmp_path)
        try:
            tab = await open_tab(context)
            with anyio.fail_after(GUARD_S):
                await tab.goto(server.url + "/")
                # The offer's 401 is the WebSocket's 4401: a prompt, no error.
                await wait_for(tab, "window.voiceMembrane.state === 'token'")
                assert await tab.is_hidden("#error")
                await tab.fill("#token", "a-wrong-token")
                await tab.press("#token", "Enter")
                await wait_for(tab, "!document.getElementById('error').hidden")
                assert "4401" in await tab.inner_text("#error")
                await tab.fill("#token", token)
                await tab.press("#token", "Enter")
                await wait_for(tab, "window.voiceMembrane.state === 'idle'")
                assert await tab.evaluate("window.voiceMembrane.transport") == "webrtc"
                assert tab.events == []  # (no WebSocket was opened)
            refused = [f["reason"] for k, f in logs if k == "http_refused"]
            assert refused == ["no_token", "wrong_token"]
            assert not any(token in repr(fields) for _, fields in logs)
        finally:
            await context.close()
