"""``bench --input --scripted``: the embedded recognizer replaced by the fake
Deepgram (``testing/fake_deepgram.py``) through the real ``deepgram`` engine, the
LLM and TTS by ``--scripted``'s fakes, all in a process of their own
(``fakes.py``). The fake answers each ``Finalize`` after exactly
``FINALIZE_S``; the STT's finalize → final, less that, is what our code (the
SDK, our engine, the listener's task) adds to the turn — a figure to compare
across machines and versions.

Each utterance's stream gets the next scripted transcript: the fixtures'
utterances in order (their words all heard within the first 50 ms of audio,
so the final carries the whole text whatever the utterance's length).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..pipeline.config import PipelineConfig
from .environ import variables
from .fakes import fakes_process
from .scripted import KEY_ENV, fake_pipeline, need_fakes
from .scripted_script import KEY, SCRIPTS, reply, speech
from .voice_inputs import VoiceInput
from .voice_run import VoiceTarget

if TYPE_CHECKING:
    from ..testing.fake_server import FakeServer

FINALIZE_S = 0.15  # the fake's own time to answer a Finalize
LABEL = "scripted: fake Deepgram → fake OpenAI chat → fake OpenAI speech"


def voice_fakes(texts: list[str]) -> dict[str, FakeServer]:
    """The fakes' recipe (run in their process): a transcript per utterance."""
    from ..testing.fake_deepgram import FakeDeepgram
    from ..testing.fake_openai import FakeOpenAI
    from ..testing.fake_openai_speech import FakeOpenAISpeech
    from ..testing.transcript_script import TranscriptScript

    scripts = [
        TranscriptScript.of(text, word_s=0.005, gap_s=0.0, lead_s=0.0, finalize_s=FINALIZE_S)
        for text in texts
    ]
    return {
        "chat": FakeOpenAI(*[reply()] * SCRIPTS),
        "openai": FakeOpenAISpeech(*[speech()] * SCRIPTS, api_key=KEY),
        "deepgram": FakeDeepgram(*scripts, api_key=KEY),
    }


@contextlib.contextmanager
def scripted_voice_target(
    inputs: Sequence[VoiceInput], base: PipelineConfig
) -> Iterator[VoiceTarget]:
    """The fakes started and a target on them; ``base`` gives the ``[vad]`` and
    ``[endpoint]`` settings."""
    need_fakes("fake_deepgram", "fake_openai")
    texts = [text for item in inputs for text in (item.said or ("",))]
    with variables(**{KEY_ENV: KEY}), fakes_process(voice_fakes, texts) as fakes:
        urls = fakes.urls()
        data: dict[str, Any] = base.model_dump(exclude_unset=True)
        stt = {"spec": "deepgram:nova-3", "base_url": urls["deepgram"], "api_key_env": KEY_ENV}
        data.update(fake_pipeline(urls, "openai:alloy"), stt={**stt, "retry": False})
        yield VoiceTarget(LABEL, PipelineConfig.model_validate(data), FINALIZE_S)
