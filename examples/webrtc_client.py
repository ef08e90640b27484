"""Talk to `voice-membrane serve` over WebRTC from Python (aiortc).

    voice-membrane serve --pipeline pipelines/local-voice.toml &
    python examples/webrtc_client.py http://127.0.0.1:8765 \
        --wav audio_fixtures/speech/questions/weather_paris.wav --out answer.wav

It POSTs its SDP offer to /v1/webrtc/offer, starts the session on the data
channel (the protocol of docs/websocket-protocol.md), speaks the WAV as its
microphone, prints each event as it comes, and saves the audio it received until
the first turn ends. A server with a token: VOICE_MEMBRANE_TOKEN in the
environment (sent as Authorization: Bearer). docs/webrtc.md has the details.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import anyio
import numpy as np
import soundfile as sf

from voice_membrane.testing.webrtc_client import RATE, Refused, WebRtcClient


async def talk(url: str, wav: str | None, out: str, pipeline: str | None, text: str | None) -> int:
    token = os.environ.get("VOICE_MEMBRANE_TOKEN")
    try:
        async with WebRtcClient(url, token=token) as client:
            fields = {"pipeline": pipeline} if pipeline else {}
            if wav is not None:
                fields["input_audio"] = {}  # listen (the format is the track's: Opus)
            started = await client.start(**fields)
            print(json.dumps(started))
            if started["type"] != "session.started":
                return 1
            if wav is not None:
                samples, rate = sf.read(wav, dtype="int16", always_2d=True)
                client.speak(np.asarray(samples[:, 0]), rate)
            if text is not None:
                client.send(type="user.message", text=text)
            printed = 0

            def turn_ended(event: dict[str, object]) -> bool:
                nonlocal printed
                for new in client.events[printed:]:
                    print(json.dumps(new))
                printed = len(client.events)
                return event["type"] == "turn.end"

            await client.wait_for(turn_ended, timeout_s=120)
            sf.write(out, client.received.audio(), RATE, subtype="PCM_16")
            print(f"saved {len(client.received.frames) * 0.02:.1f} s of audio to {out}")
    except Refused as exc:
        print(f"the server refused the offer: {exc}", file=sys.stderr)
        return 1
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:8765")
    parser.add_argument("--wav", help="what the microphone says (any rate, mono or stereo)")
    parser.add_argument("--text", help="a typed message instead of (or besides) the WAV")
    parser.add_argument("--pipeline", help="a pipeline other than the server's first")
    parser.add_argument("--out", default="answer.wav", help="where the received audio goes")
    args = parser.parse_args()
    if args.wav is None and args.text is None:
        parser.error("give --wav or --text")
    sys.exit(anyio.run(talk, args.url, args.wav, args.out, args.pipeline, args.text))


if __name__ == "__main__":
    main()
