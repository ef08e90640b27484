"""The page of `voice-membrane serve` in a real browser: Debian's chromium driven by
Playwright (never a downloaded browser) against an in-process server on a free port,
with a recorded reply (thinking, a tool call and its result, spoken text) and espeak-ng.

One session, two turns: the first plays to its end (the audio, the transcript, the
hidden blocks, the waterfall), the second is interrupted while it speaks.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from voice_membrane.server.server import Server

pytestmark = pytest.mark.anyio

CHROMIUM = Path(os.environ.get("VOICE_MEMBRANE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--autoplay-policy=no-user-gesture-required",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
# Set to a path (docs/serve-page.png) to keep the page's screenshots after a turn, with
# its details open: that path at 1280 px, and NAME-phone.png beside it at 375 px
# (tests/test_browser_page_app.py takes them).
SCREENSHOT_ENV = "VOICE_MEMBRANE_PAGE_SCREENSHOT"

THINKING = "The user wants the weather in Paris. I should call the forecast tool."
FIRST = "Sure, let me look."
ANSWER = "Tomorrow, light rain in Paris."
REPLY = (
    f"<thinking>{THINKING}</thinking>{FIRST}<function_calls>\n"
    '<invoke name="get_forecast">\n<parameter name="city">Paris</parameter>\n'
    "</invoke>\n</function_calls><function_results>\n"
    '<result tool_use_id="toolu_page_1">{"summary": "light rain and wind"}</result>\n'
    f"</function_results>{ANSWER}"
)
HIDDEN_WORDS = ("user wants", "forecast tool", "get_forecast", "toolu_page_1", '"summary"')
STAMPS = (
    "request_sent",
    "first_token",
    "first_visible",
    "first_chunk",
    "tts_first_byte",
    "first_audio",
    "last_audio",
)


def write_pipeline(folder: Path) -> Path:
    """A recording of REPLY streamed word by word, spoken by espeak-ng."""
    recording = folder / "reply.jsonl"
    lines = [{"format": "voice-membrane-replay", "version": 1, "mode": "prefill"}]
    pieces = re.findall(r"\S+\s*|\s+", REPLY)
    lines += [{"t_ms": 5 * i, "text": piece} for i, piece in enumerate(pieces)]
    recording.write_text("".join(json.dumps(line) + "\n" for line in lines))
    pipeline = folder / "page.toml"
    pipeline.write_text(
        f'[llm]\nspec = "replay:{recording.name}"\n\n[tts]\nspec = "espeak"\n\n'
        '[sink]\nkind = "null"\n'
    )
    return pipeline


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with Server([write_pipeline(tmp_path)], port=0) as running:
        yield running


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the page is tested in Debian's chromium, "
            "installed by scripts/system-packages.sh (as root)"
        )
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.fail("playwright is missing: install the dev extra (pip install -e '.[dev]')")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch_persistent_context(
            tmp_path / "chromium-profile",
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 900, "height": 600},
        )
        try:
            tab = await browser.new_page()
            errors: list[str] = []
            tab.on("pageerror", lambda error: errors.append(str(error)))
            # The page runs under the server's Content-Security-Policy: anything it
            # blocks is reported by the event and on the console.
            await browser.add_init_script(CSP_LISTENER)
            blocked: list[str] = []
            tab.on(
                "console",
                lambda message: (
                    blocked.append(message.text)
                    if "Content Security Policy" in message.text
                    else None
                ),
            )
            yield tab
            assert errors == [], f"the page raised: {errors}"
            assert blocked == [], f"the CSP blocked: {blocked}"
            if not tab.is_closed() and tab.url.startswith("http"):
                violations = await tab.evaluate("window.__cspViolations || []")
                assert violations == [], f"the CSP blocked: {violations}"
        finally:
            await browser.close()


CSP_LISTENER = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""


async def wait_for(page: Any, expression: str) -> None:
    """Until ``expression`` is truthy in the page. Polled from here: Playwright's
    own ``wait_for_function`` evaluates its predicate with ``eval`` inside the
    page, which the page's policy (no 'unsafe-eval') refuses; ``evaluate`` goes
    through the DevTools protocol, outside the policy. The callers' fail_after
    guards against a hang."""
    while not await page.evaluate(expression):
        await anyio.sleep(0.02)


async def status(page: Any) -> dict[str, Any]:
    result: dict[str, Any] = await page.evaluate(
        "() => ({...window.voiceMembrane, playedSeconds: window.voiceMembrane.playedSeconds()})"
    )
    return result


# The AudioWorklet player, and the AudioBuffer one the page falls back to where
# worklets are not available (a page served over plain HTTP to another machine).
@pytest.mark.parametrize(
    ("query", "player"), [("", "AudioWorklet"), ("?player=buffers", "AudioBuffer")]
)
async def test_the_page_speaks_a_turn_shows_it_and_stops_on_interrupt(
    server: Server, page: Any, tmp_path: Path, query: str, player: str
) -> None:
    with anyio.fail_after(60):  # a guard against a hang, not a timing check
        loaded = await page.goto(server.url + "/" + query)
        assert "frame-ancestors 'none'" in loaded.headers["content-security-policy"]
        await wait_for(page, "window.voiceMembrane.state === 'idle'")

        # Turn 1: typed, Enter sends, played to its end.
        await page.fill("#message", "What's the weather tomorrow in Paris?")
        await page.press("#message", "Enter")
        # Sound reaches the speakers (the analyser in front of them hears it).
        await wait_for(page, "window.voiceMembrane.outputPeak() > 0.05")
        await wait_for(
            page,
            "window.voiceMembrane.lastTurn?.turn === 1 && window.voiceMembrane.state === 'idle'",
        )
        # Every sample the page scheduled is played (and none is lost on the way).
        await wait_for(
            page, "window.voiceMembrane.samplesPlayed === window.voiceMembrane.samplesScheduled"
        )
        s = await status(page)
        turn = s["lastTurn"]
        rate = s["sampleRate"]
        assert s["audioContextState"] == "running"
        assert s["player"] == player
        assert turn["interrupted"] is False
        assert turn["audioSeconds"] > 1.5  # espeak-ng spoke both sentences
        # The turn's audio, every frame of it (no gap in the sequence), was played.
        assert s["framesLost"] == 0
        assert turn["frames"] == s["framesScheduled"]
        assert turn["samples"] / rate == pytest.approx(turn["audioSeconds"], abs=0.05)
        assert s["playedSeconds"] == pytest.approx(turn["samples"] / rate, abs=0.001)

        # The transcript holds the visible text only.
        user = await page.inner_text("#transcript li.user")
        assert "weather tomorrow in Paris" in user
        reply = await page.inner_text('#transcript li.reply[data-turn="1"] .text')
        assert FIRST in reply and ANSWER in reply
        assert not [word for word in HIDDEN_WORDS if word in reply]
        assert turn["heard"].strip() == reply.strip()

        # The hidden panel (in the details) has each hidden block, with its type.
        await page.click("#details > summary")
        await page.click("#hidden-panel summary")
        kinds = await page.eval_on_selector_all(
            "#hidden-blocks li", "items => items.map(item => item.dataset.type)"
        )
        assert {"thinking", "tool_call", "tool_result"} <= set(kinds)
        hidden = await page.inner_text("#hidden-blocks")
        assert THINKING in hidden
        assert 'get_forecast({"city":"Paris"})' in hidden
        assert "light rain and wind" in hidden
        assert ANSWER not in hidden

        # The waterfall shows a number for each stamp, in order.
        cells = await page.eval_on_selector_all(
            '.waterfall[data-turn="1"] tr[data-stamp]',
            "rows => rows.map(row => [row.dataset.stamp, row.querySelector('.ms').textContent])",
        )
        assert [stamp for stamp, _ in cells] == list(STAMPS)
        values = [int(re.fullmatch(r"(\d+) ms", text)[1]) for _, text in cells]  # type: ignore[index]
        assert values == sorted(values) and values[-1] > 1000

        await page.screenshot(path=str(tmp_path / "page.png"), full_page=True)

        # Turn 2: interrupted while it speaks; the audio stops at once.
        played_before = s["playedSeconds"]
        await page.fill("#message", "And the day after?")
        await page.press("#message", "Enter")
        await wait_for(page, f"window.voiceMembrane.playedSeconds() > {played_before + 0.8}")
        await page.keyboard.press("Escape")
        # Silence at once: the audio still held is not played out (the server sent it
        # ~200 ms ahead). The analyser's window is ~40 ms; the wait only has to exceed it.
        await page.wait_for_timeout(120)
        assert await page.evaluate("window.voiceMembrane.outputPeak()") == 0
        await wait_for(
            page,
            "window.voiceMembrane.lastTurn?.turn === 2 && window.voiceMembrane.state === 'idle'",
        )
        await wait_for(page, "!window.voiceMembrane.playing")
        stopped = await status(page)
        await page.wait_for_timeout(400)
        later = await status(page)
        assert later["playedSeconds"] == stopped["playedSeconds"]
        # The audio the page held when it was interrupted (the server sends ~200 ms
        # ahead) was dropped, not played out.
        assert later["samplesPlayed"] < later["samplesScheduled"]
        assert later["audioContextState"] == "running"
        assert later["lastTurn"]["interrupted"] is True
        # The page shows what the server counts as heard: the first words, no more (the
        # server counts from when it sent the audio, so at least what the page played:
        # "Sure," is ~0.55 s of espeak-ng).
        heard = later["lastTurn"]["heard"]
        assert heard and FIRST.startswith(heard) and len(heard) < len(FIRST)
        second = await page.inner_text('#transcript li.reply[data-turn="2"] .text')
        assert second.strip() == heard
        note = await page.inner_text('#transcript li.reply[data-turn="2"] .note')
        assert "interrupted" in note


async def test_the_policy_is_enforced_and_the_listener_hears_it(server: Server, page: Any) -> None:
    """The fixture's check can fail: an inline script is refused and reported."""
    with anyio.fail_after(60):
        other = await page.context.new_page()  # its console is not the fixture's
        await other.goto(server.url + "/")
        await wait_for(other, "window.voiceMembrane.state === 'idle'")
        await other.evaluate(
            "() => { const s = document.createElement('script');"
            " s.textContent = 'window.injected = 1'; document.head.append(s); }"
        )
        await wait_for(other, "window.__cspViolations.length > 0")
        assert await other.evaluate("window.injected") is None
        assert (await other.evaluate("window.__cspViolations[0]")).startswith("script-src")
        await other.close()


@contextlib.contextmanager
def framing_site(html: str) -> Iterator[str]:
    """Another origin (a port of its own on loopback, so the browser's local
    network checks do not block the frame first) serving ``html``."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    # Threaded: the browser may open a spare connection it never sends on, on
    # which a one-at-a-time server would wait, and shutdown() with it (100 s in CI).
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_port}/"
    finally:
        site.shutdown()
        thread.join()


async def test_another_site_cannot_frame_the_page(server: Server, page: Any) -> None:
    """A page of another origin that frames it gets an error page in the frame:
    X-Frame-Options DENY, frame-ancestors 'none'."""
    with anyio.fail_after(60), framing_site(f'<iframe src="{server.url}/"></iframe>') as other:
        framer = await page.context.new_page()  # its console is not the fixture's
        said: list[str] = []
        framer.on("console", lambda message: said.append(message.text))
        await framer.goto(other)
        while len(framer.frames) < 2 or framer.frames[1].url == "about:blank":
            await anyio.sleep(0.05)
        framed = framer.frames[1]
        assert framed.url.startswith("chrome-error:"), framed.url
        assert await framed.evaluate("typeof window.voiceMembrane") == "undefined"
        assert any("frame-ancestors 'none'" in text for text in said), said
        await framer.close()
