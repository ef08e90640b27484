"""A held reply thrown away leaves llama.cpp's KV cache fit for the next turn:
the request for the whole utterance reuses the cached conversation up to where
the words differ (counted on llama.cpp's own evaluated-token counters), and
answers as a freshly read prompt would."""

from __future__ import annotations

import contextlib

import anyio
import numpy as np
import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

from voice_membrane.providers.base import ChatMessage
from voice_membrane.providers.llama_kv import common_prefix, evaluated_tokens
from voice_membrane.providers.local_llama import LocalLlama

REPLY_TOKENS = 8
HISTORY = [
    ChatMessage("user", "What colour is the sky on a clear day?"),
    ChatMessage("assistant", "It is blue on a clear day."),
    ChatMessage("user", "And at sunset?"),
    ChatMessage("assistant", "Orange and red, often pink."),
]
HELD = [*HISTORY, ChatMessage("user", "My number is five five five")]
WHOLE = [*HISTORY, ChatMessage("user", "My number is five five five zero one two three.")]


def _reply(src: LocalLlama, messages: list[ChatMessage], stop_after: int | None = None) -> str:
    async def run() -> str:
        out: list[str] = []
        async with contextlib.aclosing(src.stream(messages)) as deltas:
            async for delta in deltas:
                out.append(delta)
                if stop_after is not None and len(out) >= stop_after:
                    break  # the held reply thrown away mid-generation
        return "".join(out)

    return anyio.run(run)


def test_a_discarded_held_reply_leaves_the_cache_reused_and_the_answer_unchanged() -> None:
    src = LocalLlama(max_tokens=REPLY_TOKENS, temperature=0.0, seed=0)
    anyio.run(src.start)
    llama = src.model.llama
    held_ids = src.model.prompt_token_ids(src.messages_for(HELD))
    whole_ids = src.model.prompt_token_ids(src.messages_for(WHOLE))
    assert held_ids is not None and whole_ids is not None
    shared = common_prefix(np.asarray(held_ids, np.intc), np.asarray(whole_ids, np.intc))
    assert shared > len(held_ids) - 8  # the held words are a prefix of the whole's

    _reply(src, HELD, stop_after=2)
    before = evaluated_tokens(llama)
    after_discard = _reply(src, WHOLE)
    evaluated = evaluated_tokens(llama) - before
    # Only what follows the shared prefix is read (not the conversation again),
    # plus the reply's own tokens.
    assert evaluated <= len(whole_ids) - shared + REPLY_TOKENS + 1
    assert len(whole_ids) - shared < 30 < shared  # (so the bound above means something)

    with src.model.lock:
        llama.reset()  # the same request read from nothing
    src.model.cache.owner = None
    fresh = _reply(src, WHOLE)
    assert after_discard == fresh and after_discard.strip()
