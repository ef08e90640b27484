"""The page of `voice-membrane serve` as a voice app, in Debian's chromium driven by
Playwright: the speaking indicator and its level meter, mute and volume, the details
toggle, phone widths, a server that needs a token, the pipeline picker, the waterfall
on one axis (broken at the first audio when the reply is long), the hint of a slow
first answer and the cut-off marker.

One browser and one server (four pipelines) for the module; each test has its own
browser context (its own storage).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.test_browser_page import CHROMIUM, CHROMIUM_ARGS, CSP_LISTENER, SCREENSHOT_ENV, wait_for
from voice_membrane.server.server import Server
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import ScriptedReply

pytestmark = pytest.mark.anyio

ANSWER = "Tomorrow, light rain in Paris. Take an umbrella, and a warm coat too."
DESCRIPTIONS = {
    "page": "a recorded answer spoken by espeak-ng",
    "slow": "the same answer, after the model thinks for 1.5 s",
    "cut": "an OpenAI-style model that runs out of tokens",
}
CUT_TEXT = "Here are the three things to pack. First, an umbrella. Second, a"
TOKEN = "page-app-test-token-7d2f"
SLOW_MS = 1500


def recording(folder: Path, name: str, first_ms: int) -> Path:
    path = folder / f"{name}.jsonl"
    lines: list[dict[str, Any]] = [{"format": "voice-membrane-replay", "version": 1}]
    pieces = re.findall(r"\S+\s*", ANSWER)
    lines += [{"t_ms": first_ms + 5 * i, "text": piece} for i, piece in enumerate(pieces)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def pipelines(folder: Path, openai_url: str) -> list[Path]:
    tts = '[tts]\nspec = "espeak"\n\n[sink]\nkind = "null"\n'
    llms = {
        "page": f'spec = "replay:{recording(folder, "page", 0).name}"',
        "slow": f'spec = "replay:{recording(folder, "slow", SLOW_MS).name}"',
        "cut": f'spec = "openai:gpt-test"\nbase_url = "{openai_url}"\napi_key_env = "PAGE_KEY"',
    }
    paths = []
    for name, llm in llms.items():
        path = folder / f"{name}.toml"
        path.write_text(f'description = "{DESCRIPTIONS[name]}"\n\n[llm]\n{llm}\n\n{tts}')
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[FakeOpenAI]:
    cut = ScriptedReply.of(CUT_TEXT, stop_reason="max_tokens")
    with FakeOpenAI(*[cut] * 4) as fake:
        yield fake


@pytest.fixture(scope="module")
async def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("page-app")


@pytest.fixture(scope="module")
async def server(folder: Path, fake_openai: FakeOpenAI) -> AsyncIterator[Server]:
    os.environ["PAGE_KEY"] = "fake-key"
    try:
        async with Server(pipelines(folder, fake_openai.base_url), port=0) as running:
            yield running
    finally:
        del os.environ["PAGE_KEY"]


@pytest.fixture(scope="module")
async def token_server(folder: Path, server: Server) -> AsyncIterator[Server]:
    # (``server`` wrote the pipeline files)
    async with Server([folder / "page.toml"], port=0, token=TOKEN) as running:
        yield running


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: installed by scripts/system-packages.sh (as root)")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        await launched.close()


async def open_page(browser: Any, width: int = 1280) -> Any:
    context = await browser.new_context(viewport={"width": width, "height": 800})
    await context.add_init_script(CSP_LISTENER)
    tab = await context.new_page()
    tab.problems = []
    tab.on("pageerror", lambda error: tab.problems.append(str(error)))
    tab.on(
        "console",
        lambda m: tab.problems.append(m.text) if "Content Security Policy" in m.text else None,
    )
    return tab


@pytest.fixture
async def pages(browser: Any) -> AsyncIterator[list[Any]]:
    """Pages the test opens (``open_page``), checked for errors and CSP violations."""
    opened: list[Any] = []
    yield opened
    for tab in opened:
        assert tab.problems == [], tab.problems
        assert await tab.evaluate("window.__cspViolations") == []
        await tab.context.close()


async def start(browser: Any, pages: list[Any], url: str, width: int = 1280) -> Any:
    tab = await open_page(browser, width)
    pages.append(tab)
    await tab.goto(url)
    await wait_for(tab, "window.voiceMembrane.state === 'idle'")
    return tab


async def say(tab: Any, text: str) -> int:
    """Send ``text``; wait for its turn to end and its audio to play out. Its number."""
    before = await tab.evaluate("window.voiceMembrane.lastTurn?.turn ?? 0")
    await tab.fill("#message", text)
    await tab.press("#message", "Enter")
    await wait_for(
        tab,
        f"window.voiceMembrane.lastTurn?.turn === {before + 1} && "
        "window.voiceMembrane.state === 'idle' && !window.voiceMembrane.playing",
    )
    return int(before + 1)


async def test_the_voice_shows_and_its_level_moves_and_mute_and_volume_work(
    server: Server, browser: Any, pages: list[Any]
) -> None:
    with anyio.fail_after(60):  # a guard against a hang, not a timing check
        tab = await start(browser, pages, server.url + "/?pipeline=page")
        assert await tab.get_attribute("#voice", "data-speaking") == "false"
        assert await tab.evaluate("window.voiceMembrane.meterLevel") == 0
        await tab.fill("#message", "Weather tomorrow?")
        await tab.press("#message", "Enter")
        # While the reply is heard: the indicator is on and the bar moves.
        await wait_for(tab, "window.voiceMembrane.meterLevel > 0.3")
        assert await tab.get_attribute("#voice", "data-speaking") == "true"
        assert await tab.inner_text("#state") == "speaking"
        bar = await tab.eval_on_selector("#level", "el => el.getBoundingClientRect().width")
        assert bar > 10

        # Muted: nothing reaches the speakers, the voice plays on (and is metered).
        await tab.click("#mute")
        assert await tab.evaluate("window.voiceMembrane.gain") == 0
        assert await tab.get_attribute("#mute", "aria-pressed") == "true"
        played = await tab.evaluate("window.voiceMembrane.samplesPlayed")
        await tab.wait_for_timeout(120)  # past the analysers' ~43 ms window
        await wait_for(tab, "window.voiceMembrane.voicePeak() > 0.05")
        assert await tab.evaluate("window.voiceMembrane.outputPeak()") == 0
        await wait_for(tab, f"window.voiceMembrane.samplesPlayed > {played + 2400}")
        assert await tab.inner_text("#state") == "speaking (muted)"

        # Half volume: half the level reaches the speakers.
        await tab.fill("#volume", "0.5")
        assert await tab.evaluate("window.voiceMembrane.gain") == 0.5
        assert await tab.get_attribute("#mute", "aria-pressed") == "false"
        await tab.wait_for_timeout(120)
        # The two analysers are read a moment apart: on a loaded machine one read
        # can straddle a loud and a quiet block, so wait for a steady reading (a
        # volume not applied reads 1.0 and never gets there).
        await wait_for(
            tab,
            "window.voiceMembrane.voicePeak() > 0.05 && Math.abs(window.voiceMembrane"
            ".outputPeak() / window.voiceMembrane.voicePeak() - 0.5) <= 0.02",
        )

        # After the reply: the bar falls to rest, the indicator is off.
        await wait_for(
            tab, "window.voiceMembrane.state === 'idle' && !window.voiceMembrane.playing"
        )
        await wait_for(tab, "window.voiceMembrane.meterLevel === 0")
        assert await tab.get_attribute("#voice", "data-speaking") == "false"
        assert await tab.inner_text("#state") == "ready"
        # The whole reply was heard, muted or not.
        heard = await tab.evaluate("window.voiceMembrane.lastTurn.heard")
        assert heard.strip() == ANSWER
        # The volume is remembered.
        await tab.reload()
        await wait_for(tab, "window.voiceMembrane.state === 'idle'")
        assert await tab.input_value("#volume") == "0.5"


async def test_details_are_closed_at_first_and_the_choice_is_remembered(
    server: Server, browser: Any, pages: list[Any]
) -> None:
    with anyio.fail_after(60):
        tab = await start(browser, pages, server.url + "/?pipeline=page")
        assert await tab.evaluate("document.getElementById('details').open") is False
        for hidden in ("#audio-info", "#session-info", "#waterfalls"):
            assert await tab.is_hidden(hidden)
        await tab.click("#details > summary")
        assert await tab.is_visible("#audio-info")
        assert "pcm16" in await tab.inner_text("#audio-info")
        assert "replay:page.jsonl" in await tab.inner_text("#session-info")
        # The choice is stored on the toggle event, which the browser fires a task
        # after the click: reload only once it is (a reload at once raced it).
        await wait_for(tab, f"localStorage.getItem('{DETAILS_KEY}') === 'open'")
        await tab.reload()
        await wait_for(tab, "window.voiceMembrane.state === 'idle'")
        assert await tab.evaluate("document.getElementById('details').open") is True
        await tab.click("#details > summary")
        await wait_for(tab, f"localStorage.getItem('{DETAILS_KEY}') === 'closed'")
        await tab.reload()
        await wait_for(tab, "window.voiceMembrane.state === 'idle'")
        assert await tab.evaluate("document.getElementById('details').open") is False


DETAILS_KEY = "voice-membrane.details"  # where the page remembers the details toggle
FITS = """() => {
  const width = window.innerWidth;
  const boxes = [...document.querySelectorAll('button, input, select')]
    .filter((el) => el.offsetParent !== null)
    .map((el) => [el.id, el.getBoundingClientRect()]);
  const out = boxes.filter(([, r]) => r.left < 0 || r.right > width).map(([id]) => id);
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, ra] = boxes[i], [b, rb] = boxes[j];
      if (ra.left < rb.right && rb.left < ra.right && ra.top < rb.bottom && rb.top < ra.bottom)
        overlaps.push(`${a}/${b}`);
    }
  return {scroll: document.documentElement.scrollWidth, width, out, overlaps,
          seen: boxes.map(([id]) => id)};
}"""


async def assert_fits(tab: Any, expected: set[str]) -> None:
    fit = await tab.evaluate(FITS)
    assert fit["scroll"] <= fit["width"], fit
    assert fit["out"] == [] and fit["overlaps"] == [], fit
    assert expected <= set(fit["seen"]), fit


@pytest.mark.parametrize("width", [1280, 375, 320])
async def test_the_page_fits_the_screen(
    server: Server, browser: Any, pages: list[Any], width: int
) -> None:
    with anyio.fail_after(60):
        tab = await start(browser, pages, server.url + "/?pipeline=page", width)
        await say(tab, "Weather tomorrow?")
        await tab.click("#details > summary")
        await tab.click("#hidden-panel > summary")
        await assert_fits(tab, {"pipeline", "mute", "volume", "message", "send", "interrupt"})
        # The waterfall's axis labels stay inside the page too.
        assert await tab.is_visible('.waterfall[data-turn="1"]')
        await assert_fits(tab, set())
        shot = os.environ.get(SCREENSHOT_ENV)
        if shot and width in (1280, 375):
            path = Path(shot) if width == 1280 else Path(shot).with_stem(Path(shot).stem + "-phone")
            await tab.screenshot(path=str(path), full_page=True)


async def test_a_token_is_asked_for_before_any_error(
    token_server: Server, browser: Any, pages: list[Any]
) -> None:
    with anyio.fail_after(60):
        tab = await open_page(browser, 320)
        pages.append(tab)
        await tab.goto(token_server.url + "/")
        # The server needs a token: the page asks for it, no error before the user tried.
        await wait_for(tab, "window.voiceMembrane.state === 'token'")
        assert await tab.is_hidden("#error")
        assert await tab.is_visible("#token-prompt")
        assert await tab.inner_text("#state") == "token needed"
        assert await tab.evaluate("document.activeElement.id") == "token"
        assert await tab.is_disabled("#message")
        await assert_fits(tab, {"token", "connect-button"})

        await tab.fill("#token", "a-wrong-token")
        await tab.press("#token", "Enter")
        await wait_for(tab, "!document.getElementById('error').hidden")
        assert "refused this token" in await tab.inner_text("#error")
        assert "4401" in await tab.inner_text("#error")
        assert await tab.evaluate("window.voiceMembrane.state") == "token"

        await tab.fill("#token", TOKEN)
        await tab.press("#token", "Enter")
        await wait_for(tab, "window.voiceMembrane.state === 'idle'")
        assert await tab.is_hidden("#error")
        assert await tab.is_hidden("#connect")
        assert await tab.is_enabled("#message")
        # Kept for this tab only: in sessionStorage, never in localStorage or the address.
        assert await tab.evaluate("sessionStorage.getItem('voice-membrane.token')") == TOKEN
        assert TOKEN not in await tab.evaluate("JSON.stringify({...localStorage})")
        assert TOKEN not in tab.url
        # A reload in the same tab connects without asking again.
        await tab.reload()
        await wait_for(tab, "window.voiceMembrane.state === 'idle'")
        assert await tab.is_hidden("#token-prompt")


async def test_the_picker_is_labelled_describes_each_pipeline_and_keeps_the_conversation(
    server: Server, browser: Any, pages: list[Any]
) -> None:
    with anyio.fail_after(60):
        tab = await start(browser, pages, server.url + "/")
        assert await tab.is_visible("label[for=pipeline]")
        assert await tab.inner_text("label[for=pipeline]") == "Pipeline"
        options = await tab.eval_on_selector_all(
            "#pipeline option", "os => os.map(o => [o.value, o.textContent])"
        )
        assert [value for value, _ in options] == ["page", "slow", "cut"]
        for value, shown in options:
            assert DESCRIPTIONS[value] in shown
        await say(tab, "Weather tomorrow?")
        first = await tab.evaluate("window.voiceMembrane.session")

        await tab.select_option("#pipeline", "cut")
        await wait_for(tab, f"window.voiceMembrane.session !== {json.dumps(first)}")
        await wait_for(tab, "window.voiceMembrane.state === 'idle'")
        assert tab.url.endswith("?pipeline=cut")
        # The conversation stays on screen, with a line saying what the new one knows.
        transcript = await tab.inner_text("#transcript")
        assert "Weather tomorrow?" in transcript and ANSWER in transcript
        divider = await tab.inner_text("#transcript li.divider")
        assert "cut" in divider and "does not remember" in divider


BREAK_AT = 0.7  # scale.js: the share of the width the linear part keeps


def scale(axis: float, knee: float | None) -> Any:
    """Where a time falls on the waterfall's track, 0 to 1: linear up to the axis's
    end, or, broken at ``knee``, linear up to it over BREAK_AT of the width and
    logarithmic past it."""

    def at(ms: float) -> float:
        if knee is None:
            return ms / axis
        if ms <= knee:
            return BREAK_AT * ms / knee
        return BREAK_AT + (1 - BREAK_AT) * math.log(ms / knee) / math.log(axis / knee)

    return at


def stage_widths(figure: str) -> str:
    return f"""() => {{
      const figure = document.querySelector('{figure}');
      return [...figure.querySelectorAll('tr[data-stamp]')].map((row) => {{
        const track = row.querySelector('.track').getBoundingClientRect();
        const bar = row.querySelector('.bar')?.getBoundingClientRect();
        return [row.dataset.stamp, track.left, track.width,
                bar ? bar.left : null, bar ? bar.width : null];
      }});
    }}"""


async def test_the_waterfall_is_to_scale_and_a_slow_start_says_why(
    server: Server, browser: Any, pages: list[Any]
) -> None:
    with anyio.fail_after(60):
        tab = await start(browser, pages, server.url + "/?pipeline=slow")
        turn = await say(tab, "Weather tomorrow?")
        stamps = (await tab.evaluate(f"window.voiceMembrane.turn({turn})"))["stamps"]
        await tab.click("#details > summary")
        figure = f'.waterfall[data-turn="{turn}"]'
        axis = float(await tab.get_attribute(figure, "data-axis-ms"))
        assert stamps["last_audio"] <= axis < 2 * stamps["last_audio"]
        knee = await tab.get_attribute(figure, "data-break-ms")
        at = scale(axis, None if knee is None else float(knee))
        if knee is not None:  # broken at a round time just past the first audio
            assert stamps["first_audio"] <= float(knee) < 2 * stamps["first_audio"]
            assert axis == stamps["last_audio"]
        previous = 0.0
        for stamp, left, width, bar_left, bar_width in await tab.evaluate(stage_widths(figure)):
            value = stamps[stamp]
            begin = min(previous, value)
            # Every bar on the one axis: where it starts and how long it is, to the pixel.
            assert bar_left - left == pytest.approx(width * at(begin), abs=1), stamp
            assert bar_width == pytest.approx(max(2, width * (at(value) - at(begin))), abs=1), stamp
            assert bar_left + bar_width <= left + width + 0.5, stamp
            previous = value
        ticks = await tab.eval_on_selector_all(f"{figure} .tick", "t => t.map(e => e.textContent)")
        assert ticks[0] == "0 ms" and len(ticks) >= 3
        assert ticks[-1] == (f"{round(axis / 1000, 2):g} s" if axis >= 1000 else f"{axis:g} ms")

        # The first audio came after the model's 1.5 s: the turn says so, with the time.
        waited = stamps["first_token"] - stamps["request_sent"]
        assert waited >= SLOW_MS
        hint = await tab.inner_text(f'#transcript li.reply[data-turn="{turn}"] .badge.slow')
        assert f"waiting for the model: {round(waited)} ms" in hint
        caption = await tab.inner_text(f"{figure} figcaption")
        assert f"mostly waiting for the model: {round(waited)} ms" in caption

        # A quick first answer has no such hint (the waterfall still names its stage).
        await tab.select_option("#pipeline", "page")
        await wait_for(tab, "window.voiceMembrane.state === 'idle'")
        quick = await say(tab, "And the day after?")
        assert (await tab.evaluate(f"window.voiceMembrane.turn({quick})"))["stamps"][
            "first_audio"
        ] < 1000
        session = await tab.evaluate("window.voiceMembrane.session")
        reply = f'#transcript li.reply[data-session="{session}"][data-turn="{quick}"]'
        assert await tab.locator(f"{reply} .badge.slow").count() == 0
        assert "mostly" in await tab.inner_text(f'.waterfall[data-turn="{quick}"] figcaption')


async def test_a_reply_cut_by_the_token_limit_says_so(
    server: Server, browser: Any, pages: list[Any]
) -> None:
    with anyio.fail_after(60):
        tab = await start(browser, pages, server.url + "/?pipeline=cut")
        turn = await say(tab, "What should I pack?")
        assert (await tab.evaluate(f"window.voiceMembrane.turn({turn})"))["stopReason"] == (
            "max_tokens"
        )
        reply = f'#transcript li.reply[data-turn="{turn}"]'
        assert await tab.inner_text(f"{reply} .badge.cut-off") == "cut off (max_tokens)"
        # A reply that ended on its own has no marker.
        await tab.select_option("#pipeline", "page")
        await wait_for(tab, "window.voiceMembrane.state === 'idle'")
        await say(tab, "And the weather?")
        assert await tab.locator("#transcript li.reply .badge.cut-off").count() == 1


# A spoken turn whose answer plays for 21 s after a quick start (docs/metrics.md).
LONG_ANSWER = {
    "stamps_ms": {
        "request_sent": 0,
        "first_token": 80,
        "first_visible": 90,
        "first_chunk": 150,
        "tts_first_byte": 240,
        "first_audio": 280,
        "last_audio": 21000,
    },
    "voice_to_voice": {
        "endpointing_ms": 600,
        "transcript_final_ms": 310,
        "request_ms": 606,
        "voice_to_voice_ms": 886,
        "preemptive": False,
    },
    "counts": {"audio_seconds": 20.7, "tokens": 310},
}
SHORT_STAGES = ("first_token", "first_chunk", "tts_first_byte", "first_audio")  # 40-90 ms


async def test_short_stages_stay_visible_beside_a_21_s_answer(
    server: Server, browser: Any, pages: list[Any]
) -> None:
    with anyio.fail_after(60):
        tab = await start(browser, pages, server.url + "/?pipeline=page")
        # The scale itself (scale.js), run in the page.
        stamps = LONG_ANSWER["stamps_ms"]
        got = await tab.evaluate(
            """async (stamps) => {
              const { timeScale } = await import('/static/scale.js');
              const scale = timeScale(stamps.first_audio, stamps.last_audio);
              const at = Object.fromEntries(
                Object.entries(stamps).map(([key, ms]) => [key, scale.at(ms)]),
              );
              return { at, ticks: scale.ticks, breakMs: scale.breakMs, end: scale.end };
            }""",
            stamps,
        )
        at = got["at"]
        assert at["request_sent"] == 0 and at["last_audio"] == 1
        order = list(stamps)
        assert [at[k] for k in order] == sorted(at[k] for k in order)
        # Up to the first audio the axis is linear, over most of the width...
        knee = got["breakMs"]
        assert stamps["first_audio"] <= knee < 2 * stamps["first_audio"]
        assert at["first_audio"] > 0.5
        for key in order[:-1]:
            assert at[key] == pytest.approx(BREAK_AT * stamps[key] / knee)
        # ...so each sub-100 ms stage keeps at least 5 % of it (on one linear axis
        # to 21 s, under 0.5 %).
        for key in SHORT_STAGES:
            before = order[order.index(key) - 1]
            assert at[key] - at[before] >= 0.05, key
            assert (stamps[key] - stamps[before]) / stamps["last_audio"] < 0.005
        assert got["ticks"][0] == 0 and got["ticks"][-1] == got["end"] == stamps["last_audio"]
        assert got["ticks"] == sorted(set(got["ticks"]))

        # The figure of such a spoken turn: the end-of-speech wait first, the short
        # stages wide enough to see, the axis broken and ending at 21.6 s.
        await tab.click("#details > summary")
        await tab.evaluate(
            """async (report) => {
              const { waterfallFigure } = await import('/static/waterfall.js');
              document.getElementById('waterfalls').replaceChildren(waterfallFigure(7, report));
            }""",
            LONG_ANSWER,
        )
        figure = '.waterfall[data-turn="7"]'
        rows = await tab.evaluate(stage_widths(figure))
        assert [row[0] for row in rows] == ["endpointing", *stamps]
        widths = {stamp: bar_width for stamp, _, _, _, bar_width in rows}
        for key in SHORT_STAGES:
            assert widths[key] >= 10, (key, widths)
        assert widths["endpointing"] > widths["first_token"]
        assert await tab.locator(f"{figure} .break").count() > 0
        ticks = await tab.eval_on_selector_all(f"{figure} .tick", "t => t.map(e => e.textContent)")
        assert ticks[0] == "0 ms" and ticks[-1] == "21.61 s"
        caption = await tab.inner_text(f"{figure} figcaption")
        assert "voice to voice 886 ms: end-of-speech wait 600 ms" in caption
        await assert_fits(tab, set())
