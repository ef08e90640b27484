"""The page's microphone conversion (static/resample.js and mic-worklet.js) run in
Debian's chromium: the resampler keeps a tone in band and removes one above the new
Nyquist (nearest-sample decimation would fold it back at full level), re-chunking its
input never changes its output, the encoders agree with the server's decoders, and
the worklet posts frame_ms frames of the accepted rate, silence while its gate is
closed.

The static files are served by a plain HTTP server on loopback (a secure context,
as the worklet needs), under a blank page: no session, no server of ours.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_browser_page import CHROMIUM, CHROMIUM_ARGS
from voice_membrane.server.http_routes import STATIC_DIR
from voice_membrane.vocab.audio import pcm16_from_ulaw

BLANK = b"<!doctype html><meta charset=utf-8><title>resampler</title>"


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    class Files(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            name = self.path.removeprefix("/static/")
            if self.path == "/":
                body, kind = BLANK, "text/html"
            elif name != self.path and "/" not in name and (STATIC_DIR / name).is_file():
                body, kind = (STATIC_DIR / name).read_bytes(), "text/javascript"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_port}/"
    finally:
        site.shutdown()
        thread.join()


@pytest.fixture(scope="module")
def tab(origin: str) -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: installed by scripts/system-packages.sh (as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page()
        page.goto(origin)
        page.evaluate("async () => { window.rs = await import('/static/resample.js'); }")
        yield page
        browser.close()


RESAMPLE = """([inRate, outRate, freq, seconds, chunks]) => {
  const n = Math.round(inRate * seconds);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = 0.5 * Math.sin(2 * Math.PI * freq * i / inRate);
  const r = new window.rs.Resampler(inRate, outRate);
  const out = [];
  let i = 0, c = 0;
  while (i < n) {
    const size = chunks.length ? chunks[c++ % chunks.length] : n;
    out.push(...r.push(x.subarray(i, i + size)));
    i += size;
  }
  return out;
}"""


def resample(tab: Any, in_rate: int, freq: float, chunks: list[int] | None = None) -> np.ndarray:
    out = tab.evaluate(RESAMPLE, [in_rate, 16000, freq, 1.0, chunks or []])
    return np.asarray(out, dtype=np.float64)


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x**2)))


@pytest.mark.parametrize("in_rate", [48000, 44100, 24000])
def test_a_tone_in_band_keeps_its_level_and_pitch(tab: Any, in_rate: int) -> None:
    y = resample(tab, in_rate, 1000.0)
    assert abs(len(y) - 16000) <= 64  # the filter's half-width is held back
    middle = y[1000:15000]
    assert rms(middle) == pytest.approx(0.5 / np.sqrt(2), rel=0.01)
    spectrum = np.abs(np.fft.rfft(middle * np.hanning(len(middle))))
    peak_hz = np.argmax(spectrum) * 16000 / len(middle)
    assert peak_hz == pytest.approx(1000, abs=2)


@pytest.mark.parametrize(("in_rate", "freq"), [(48000, 10000.0), (44100, 9000.0)])
def test_a_tone_above_the_new_nyquist_is_removed_not_folded(
    tab: Any, in_rate: int, freq: float
) -> None:
    y = resample(tab, in_rate, freq)
    # Nearest-sample decimation would fold it to 6 or 7 kHz at full level (-9 dBFS).
    assert 20 * np.log10(rms(y[1000:15000]) / (0.5 / np.sqrt(2))) < -60


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    in_rate=st.sampled_from([48000, 44100, 22050]),
    chunks=st.lists(st.integers(min_value=1, max_value=700), min_size=1, max_size=12),
)
def test_cutting_the_input_differently_changes_nothing(
    tab: Any, in_rate: int, chunks: list[int]
) -> None:
    whole = tab.evaluate(RESAMPLE, [in_rate, 16000, 440.0, 0.25, []])
    cut = tab.evaluate(RESAMPLE, [in_rate, 16000, 440.0, 0.25, chunks])
    assert cut == whole


def test_the_encoders_agree_with_the_servers_decoders(tab: Any) -> None:
    values = [0.0, 0.25, -0.25, 0.999, -1.0, 1.0, 1.5, -1.5, 1e-4]
    pcm = bytes(
        tab.evaluate(
            "v => Array.from(new Uint8Array(window.rs.encodePcm16(new Float32Array(v))))", values
        )
    )
    expected = np.clip(
        np.round(np.clip(values, -1, 1) * np.where(np.array(values) < 0, 32768, 32767)),
        -32768,
        32767,
    )
    assert np.frombuffer(pcm, dtype="<i2").tolist() == expected.astype(int).tolist()
    ramp = np.linspace(-1, 1, 2001).tolist()
    ulaw = bytes(
        tab.evaluate(
            "v => Array.from(new Uint8Array(window.rs.encodeMulaw(new Float32Array(v))))", ramp
        )
    )
    decoded = pcm16_from_ulaw(ulaw).astype(np.float64) / 32768
    # μ-law's steps grow with the level: within 1/16 of the value, or 2 LSB near 0.
    error = np.abs(decoded - np.asarray(ramp, dtype=np.float32))
    assert np.all(error <= np.maximum(np.abs(ramp) / 16, 2 / 32768)), float(error.max())


WORKLET = """async ([open]) => {
  const ctx = new OfflineAudioContext(1, 48000, 48000);
  await ctx.audioWorklet.addModule('/static/mic-worklet.js');
  const node = new AudioWorkletNode(ctx, 'voice-membrane-mic', {
    processorOptions: { encoding: 'pcm16', rate: 16000, frameMs: 20, open },
  });
  const frames = [];
  node.port.onmessage = (e) => frames.push(e.data);
  const tone = new OscillatorNode(ctx, { frequency: 1000 });
  const quiet = new GainNode(ctx, { gain: 0.5 });
  tone.connect(quiet).connect(node).connect(ctx.destination);
  tone.start();
  await ctx.startRendering();
  await new Promise((done) => setTimeout(done, 300)); // the port's last messages
  return frames.map((f) => Array.from(new Int16Array(f)));
}"""


@pytest.mark.parametrize("open_", [True, False])
def test_the_worklet_posts_20_ms_frames_at_16_khz(tab: Any, open_: bool) -> None:
    frames = tab.evaluate(WORKLET, [open_])
    assert len(frames) in (49, 50)  # a second of audio, less the filter's half-width
    assert {len(frame) for frame in frames} == {320}
    samples = np.concatenate([np.asarray(f, dtype=np.float64) for f in frames]) / 32768
    if open_:
        assert rms(samples[800:]) == pytest.approx(0.5 / np.sqrt(2), rel=0.02)
    else:
        assert not samples.any()  # muted: silence, frame after frame
