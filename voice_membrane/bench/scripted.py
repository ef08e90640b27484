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
import importlib
from collections.abc import Iterator
from typing import Any

from ..chunking import SpeechChunker
from ..pipeline.config import ChunkerConfig, ConfigError, PipelineConfig
from .environ import variables
from .runner import Target
from .scripted_script import DELTA_CHARS, KEY, REPLY, TOKEN_S

KEY_ENV = "VOICE_MEMBRANE_BENCH_FAKE_KEY"
ENGINES = (
    ("scripted: OpenAI speech (a piece at a time)", "openai:alloy"),
    ("scripted: ElevenLabs socket (streaming input)", "elevenlabs:fake-voice"),
)


def first_piece_delta(chunker: ChunkerConfig, text: str, delta_chars: int) -> tuple[int, str]:
    """Which of ``text``'s scripted deltas (0-based) completes the first piece, fed
    through a ``SpeechChunker`` with ``chunker``'s options, and that piece; with no
    piece before the end it is the last delta (the flush releases the piece)."""
    from ..testing.script import ScriptedReply

    speech_chunker = SpeechChunker(**chunker.model_dump())
    deltas = list(ScriptedReply.of(text, delta_chars=delta_chars).pieces(text))
    for index, delta in enumerate(deltas):
        chunks = speech_chunker.feed(delta)
        if chunks:
            return index, chunks[0].text
    flushed = speech_chunker.flush()
    return len(deltas) - 1, flushed[0].text if flushed else text


def llm_after_first_token_ms(config: PipelineConfig) -> float:
    """How long after the first delta the scripted delta that completes the first
    piece is due: the script's deltas through the pipeline's own chunker, at the
    script's pace (the fake keeps it to the millisecond)."""
    index, _ = first_piece_delta(config.chunker, REPLY, DELTA_CHARS)
    return round(index * TOKEN_S * 1000, 3)


@contextlib.contextmanager
def scripted_targets() -> Iterator[list[Target]]:
    """The fakes' process, started, and a target per engine kind pointed at it;
    the fakes stop (and the key variable is restored) on leaving."""
    need_fakes("fake_elevenlabs", "fake_openai", "fake_openai_speech")
    from .fakes import fake_servers

    with variables(**{KEY_ENV: KEY}), fake_servers() as urls:
        targets = []
        for label, spec in ENGINES:
            config = PipelineConfig.model_validate(fake_pipeline(urls, spec))
            targets.append(Target(label, config, llm_after_first_token_ms(config)))
        yield targets


def need_fakes(*modules: str) -> None:
    """``ConfigError`` (one line) when ``voice_membrane.testing``'s fakes cannot load."""
    try:
        for module in modules:
            importlib.import_module(f"voice_membrane.testing.{module}")
    except ImportError as exc:
        raise ConfigError(
            f"--scripted needs the testing extra ({exc.name} is missing): "
            "pip install 'voice-membrane[testing]'"
        ) from None


def fake_pipeline(urls: dict[str, str], tts_spec: str) -> dict[str, Any]:
    """A pipeline on the fakes at ``urls``: the chat model and the ``tts_spec``
    engine's fake (by its vendor), with the null sink."""
    fake = {"api_key_env": KEY_ENV, "max_retries": 0}
    llm = {"spec": "openai:gpt-bench", "formatter": "native", "base_url": urls["chat"]}
    return {
        "llm": {**llm, **fake},
        "tts": {"spec": tts_spec, "base_url": urls[tts_spec.partition(":")[0]], **fake},
        "sink": {"kind": "null", "realtime": False},
    }
