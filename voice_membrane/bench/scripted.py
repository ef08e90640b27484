"""``--scripted``: the LLM and the TTS are ``voice_membrane.testing``'s fake vendor
servers on loopback (in a process of their own: ``fakes.py``), with a fixed
time to first token, token pace and TTS first byte. What is left of first audio
beyond the ideal is then what voice_membrane itself adds, a figure to compare
across machines and versions.

One target per kind of TTS engine: one that takes a piece at a time (OpenAI
speech over HTTP) and one that takes streaming input (the ElevenLabs socket).
Both use the same fake OpenAI chat model.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ..chunking import SpeechChunker
from ..pipeline.config import ConfigError, PipelineConfig
from .runner import Target
from .scripted_script import DELTA_CHARS, KEY, REPLY, TOKEN_S

KEY_ENV = "VOICE_MEMBRANE_BENCH_FAKE_KEY"
ENGINES = (
    ("scripted: OpenAI speech (a piece at a time)", "openai:alloy"),
    ("scripted: ElevenLabs socket (streaming input)", "elevenlabs:fake-voice"),
)


def llm_after_first_token_ms(config: PipelineConfig) -> float:
    """How long after the first delta the scripted delta that completes the first
    piece is due: the script's deltas through the pipeline's own chunker, at the
    script's pace (the fake keeps it to the millisecond)."""
    from ..testing.script import ScriptedReply

    chunker = SpeechChunker(**config.chunker.model_dump())
    deltas = list(ScriptedReply.of(REPLY, delta_chars=DELTA_CHARS).pieces(REPLY))
    index = len(deltas) - 1  # no piece before the end: the flush releases it
    for n, delta in enumerate(deltas):
        if chunker.feed(delta):
            index = n
            break
    return round(index * TOKEN_S * 1000, 3)


@contextlib.contextmanager
def scripted_targets() -> Iterator[list[Target]]:
    """The fakes' process, started, and a target per engine kind pointed at it;
    the fakes stop (and the key variable is restored) on leaving."""
    try:
        from ..testing import fake_elevenlabs, fake_openai, fake_openai_speech  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"--scripted needs the testing extra ({exc.name} is missing): "
            "pip install 'voice-membrane[testing]'"
        ) from None
    from .fakes import fake_servers

    with _variable(KEY_ENV, KEY), fake_servers() as urls:
        targets = []
        for label, spec in ENGINES:
            config = PipelineConfig.model_validate(_pipeline(urls["chat"], spec, urls))
            targets.append(Target(label, config, llm_after_first_token_ms(config)))
        yield targets


def _pipeline(chat_url: str, tts_spec: str, tts_urls: dict[str, str]) -> dict[str, Any]:
    return {
        "llm": {
            "spec": "openai:gpt-bench",
            "formatter": "native",
            "base_url": chat_url,
            "api_key_env": KEY_ENV,
            "max_retries": 0,
        },
        "tts": {
            "spec": tts_spec,
            "base_url": tts_urls[tts_spec.partition(":")[0]],
            "api_key_env": KEY_ENV,
            "max_retries": 0,
        },
        "sink": {"kind": "null", "realtime": False},
    }


@contextlib.contextmanager
def _variable(name: str, value: str) -> Iterator[None]:
    """``name`` set to ``value`` for the fakes' engines, as it was afterwards."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
