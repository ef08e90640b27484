"""``--scripted``'s timings and reply, shared by the benchmark and the fakes' process."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..testing.fake_speech import SpeechScript
    from ..testing.script import ScriptedReply

LLM_TTFT_S = 0.1  # before the first delta
TOKEN_S = 0.02  # between deltas
DELTA_CHARS = 4  # characters a delta (about a token)
TTS_TTFB_S = 0.08  # before each piece's (or generation's) first audio
REPLY = "Sure. The weather stays mild and dry today, with a light breeze and clear skies."
KEY = "bench-fake-key"
# Scripts are served in order, one per request or connection: far more than a run uses.
SCRIPTS = 20_000


def reply() -> ScriptedReply:
    from ..testing.script import ScriptedReply

    return ScriptedReply.of(
        REPLY, ttft_s=LLM_TTFT_S, delta_delay_s=TOKEN_S, delta_chars=DELTA_CHARS
    )


def speech() -> SpeechScript:
    from ..testing.fake_speech import SpeechScript

    return SpeechScript(ttfb_s=TTS_TTFB_S)
