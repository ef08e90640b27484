"""The answer over a lossy path: a relay on loopback drops 5 % and 15 % of the
RTP packets both ways, and the answer still plays to its end with no gap in the
client's received audio longer than 200 ms (the issue's acceptance criterion,
measured on the audio's RTP timeline, not on the wall clock)."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_helpers import write_pipeline
from webrtc_helpers import loopback_ice, rms

from voice_membrane.server import Server
from voice_membrane.testing.udp_relay import LossyRelay, is_rtp
from voice_membrane.testing.webrtc_client import WebRtcClient

pytest.importorskip("aiortc")
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("loopback_ice")]
__all__ = ["loopback_ice"]

# About five seconds of espeak-ng: some 250 packets each way.
REPLY = (
    "The weather in Paris is mild today, with a light wind from the west. "
    "Clouds will come in from the sea by the afternoon, and the evening should clear."
)
MAX_GAP_S = 0.2


@pytest.mark.parametrize("loss", [0.05, 0.15])
async def test_the_answer_plays_through_packet_loss(tmp_path: Path, loss: float) -> None:
    pipeline = write_pipeline(tmp_path, "say", REPLY)
    async with (
        Server([pipeline], port=0, log=lambda *a, **f: None, webrtc=True) as server,
        LossyRelay(loss) as relay,
        WebRtcClient(server.url, rewrite_answer=relay.rewrite_answer) as client,
    ):
        await client.start()
        client.send(type="user.message", text="What is the weather in Paris?")
        await client.wait_for(lambda e: e["type"] == "transcript.delta")
        since = len(client.received.frames)
        end = await client.wait_for(lambda e: e["type"] == "turn.end")
        assert not end["interrupted"] and end["error"] is None and end["heard"]
        answer = client.received.audio()[since * 960 :]
        assert len(answer) / 48000 > 3.0 and rms(answer) > 300  # it played: espeak, not silence
        assert client.received.longest_gap_s(since) <= MAX_GAP_S
        # The relay was in the path and dropped what it was asked to.
        total = relay.passed + relay.dropped
        assert relay.dropped > 0 and 0.5 * loss < relay.dropped / total < 2 * loss


def test_only_rtp_is_dropped() -> None:
    assert is_rtp(bytes([0x80, 111]) + bytes(10))  # Opus
    assert not is_rtp(bytes([0x80, 200]) + bytes(10))  # RTCP sender report
    assert not is_rtp(bytes([0x00, 0x01]) + bytes(18))  # STUN binding request
    assert not is_rtp(bytes([22, 254, 253]) + bytes(10))  # DTLS handshake
