"""The WebRTC offer from a page on another origin (CORS): the preflight and the
offer's answer name an origin given with ``allow_origins`` and no other, and
Debian's chromium, on a page of such an origin, holds a session over WebRTC
with its own fetch; from an origin not listed, the browser gets nothing."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from serve_helpers import write_pipeline
from webrtc_helpers import loopback_ice

from tests.test_browser_mic import GUARD_S, launch
from voice_membrane.server import Server
from voice_membrane.server.cross_origin import preflight, readable_by
from voice_membrane.server.http_post import Posted, PostIntake
from voice_membrane.server.http_routes import response

pytest.importorskip("aiortc")
pytestmark = pytest.mark.anyio
__all__ = ["loopback_ice"]

OFFER = "/v1/webrtc/offer"
APP = "https://app.example.com"
TOKEN = "a-token-for-the-cross-origin-tests"


def _options(origin: str | None, path: str = OFFER) -> Any:
    head = f"OPTIONS {path} HTTP/1.1\r\nHost: h\r\n"
    head += "" if origin is None else f"Origin: {origin}\r\n"
    posted = PostIntake(100).feed(f"{head}Access-Control-Request-Method: POST\r\n\r\n".encode())
    assert isinstance(posted, Posted) and posted.request.method == "OPTIONS"
    return posted.request


def test_a_preflight_is_answered_for_a_listed_origin_only() -> None:
    allowed = {APP}
    answer = preflight(_options("https://App.Example.com/"), allowed, OFFER)
    assert answer.status_code == 204 and answer.body == b""
    assert answer.headers["Access-Control-Allow-Origin"] == "https://App.Example.com/"
    assert answer.headers["Access-Control-Allow-Methods"] == "POST"
    assert answer.headers["Access-Control-Allow-Headers"] == "Authorization, Content-Type"
    assert "Access-Control-Allow-Credentials" not in answer.headers
    for origin in ("https://evil.example", "null", None):
        refused = preflight(_options(origin), allowed, OFFER)
        assert refused.status_code == 403 and "Access-Control-Allow-Origin" not in refused.headers
    assert preflight(_options(APP, "/metrics"), allowed, OFFER).status_code == 404
    # An answer is readable by a listed origin only; a cache keeps them apart.
    assert readable_by(response(401, "no\n"), APP).headers["Access-Control-Allow-Origin"] == APP
    unlisted = readable_by(response(201, "v=0"), None)
    assert "Access-Control-Allow-Origin" not in unlisted.headers
    assert unlisted.headers["Vary"] == "Origin"


async def test_the_port_answers_a_preflight_and_names_the_origin_on_every_answer(
    tmp_path: Path, loopback_ice: None
) -> None:
    pipeline = write_pipeline(tmp_path, "brief", "Hello.")
    async with (
        Server([pipeline], port=0, webrtc=True, allow_origins=[APP], token=TOKEN) as server,
        httpx.AsyncClient(base_url=server.url, timeout=20) as http,
    ):
        asked = {"Access-Control-Request-Method": "POST"}
        answer = await http.options(OFFER, headers={"Origin": APP, **asked})
        assert answer.status_code == 204
        assert answer.headers["access-control-allow-origin"] == APP
        refused = await http.options(OFFER, headers={"Origin": "https://evil.example", **asked})
        assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
        # The refusals a page must tell apart are readable by it: 401 asks for the token.
        offer = await http.post(OFFER, content="v=0", headers={"Origin": APP})
        assert offer.status_code == 401 and offer.headers["access-control-allow-origin"] == APP
        sent = {"Origin": "https://evil.example", "Authorization": f"Bearer {TOKEN}"}
        offer = await http.post(OFFER, content="v=0", headers=sent)
        assert offer.status_code == 403 and "access-control-allow-origin" not in offer.headers
        # Other paths are still not the port's to answer with OPTIONS.
        assert (await http.options("/", headers={"Origin": APP})).status_code == 404
        # A preflight sent a few bytes at a time is read whole.
        async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
            host = f"Host: 127.0.0.1:{server.port}"
            data = f"OPTIONS {OFFER} HTTP/1.1\r\n{host}\r\nOrigin: {APP}\r\n\r\n"
            for i in range(0, len(data), 3):
                await stream.send(data[i : i + 3].encode())
            reply = b""
            with anyio.fail_after(10):
                while b"\r\n\r\n" not in reply:
                    reply += await stream.receive()
        assert reply.startswith(b"HTTP/1.1 204 ")


async def test_without_webrtc_a_listed_origin_reads_the_404_and_falls_back(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path, "brief", "Hello.")
    async with (
        Server([pipeline], port=0, webrtc=False, allow_origins=[APP]) as server,
        httpx.AsyncClient(base_url=server.url, timeout=20) as http,
    ):
        answer = await http.options(OFFER, headers={"Origin": APP})
        assert answer.status_code == 204
        offer = await http.post(OFFER, content="v=0", headers={"Origin": APP})
        assert offer.status_code == 404 and offer.headers["access-control-allow-origin"] == APP


# A page of another origin: the offer is its own fetch, with its token, as an app's.
APP_PAGE = """<!doctype html><meta charset="utf-8"><title>app</title><script>
async function talk(url, token) {
  const pc = new RTCPeerConnection();
  pc.addTransceiver("audio", { direction: "sendrecv" });
  const channel = pc.createDataChannel("session");
  await pc.setLocalDescription(await pc.createOffer());
  await new Promise((done) => {
    if (pc.iceGatheringState === "complete") return done();
    pc.onicegatheringstatechange = () => pc.iceGatheringState === "complete" && done();
  });
  let reply;
  try {
    reply = await fetch(url, { method: "POST", body: pc.localDescription.sdp,
      headers: { "Content-Type": "application/sdp", Authorization: `Bearer ${token}` } });
  } catch (error) {
    pc.close();
    return { refused: String(error) };
  }
  if (reply.status !== 201) return { status: reply.status };
  const events = [];
  const heard = new Promise((done) => {
    channel.onmessage = (m) => {
      const event = JSON.parse(m.data);
      events.push(event.type);
      if (event.type === "session.started") {
        channel.send(JSON.stringify({ type: "user.message", text: "Hi." }));
      }
      if (event.type === "turn.end" || event.type === "error") done();
    };
  });
  await pc.setRemoteDescription({ type: "answer", sdp: await reply.text() });
  await new Promise((done) => (channel.onopen = done));
  channel.send(JSON.stringify({ type: "session.start", v: 1 }));
  await heard;
  pc.close();
  return { status: 201, events };
}
</script>"""


class QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # (the test's output is the assertions')


@contextmanager
def app_origin(folder: Path) -> Iterator[str]:
    """A page of its own origin (another port of 127.0.0.1), served by the standard library."""
    (folder / "index.html").write_text(APP_PAGE)
    handler = partial(QuietFiles, directory=folder)
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}"
    finally:
        site.shutdown()
        site.server_close()


@pytest.mark.parametrize("listed", [True, False])
async def test_a_page_of_another_origin_holds_a_session_over_webrtc(
    tmp_path: Path, loopback_ice: None, listed: bool
) -> None:
    from playwright.async_api import async_playwright

    pipeline = write_pipeline(tmp_path, "brief", "Hello there.")
    site_folder = tmp_path / "site"
    site_folder.mkdir()
    with app_origin(site_folder) as origin:
        allowed = [origin] if listed else ["https://another.example"]
        async with (
            Server([pipeline], port=0, webrtc=True, allow_origins=allowed, token=TOKEN) as server,
            async_playwright() as playwright,
        ):
            context = await launch(playwright, tmp_path)
            try:
                tab = await context.new_page()
                said: list[str] = []
                tab.on("console", lambda message: said.append(message.text))
                with anyio.fail_after(GUARD_S):
                    await tab.goto(origin + "/index.html")
                    outcome = await tab.evaluate(
                        "([url, token]) => talk(url, token)", [server.url + OFFER, TOKEN]
                    )
            finally:
                await context.close()
    if listed:
        assert outcome["status"] == 201, outcome
        assert outcome["events"][0] == "session.started" and "turn.end" in outcome["events"]
    else:  # the browser keeps the answer from the page: fetch fails as a network error
        assert "Failed to fetch" in outcome["refused"], outcome
        assert any("blocked by CORS policy" in line for line in said), said
