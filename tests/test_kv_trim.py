"""Trimming the embedded model's KV cache in place (providers/llama_kv.py).

The span finder is pure and tested with hypothesis; the trim itself runs on the real
SmolLM2-135M model, and what it saves is read from llama.cpp's own count of the
tokens it evaluated (never from a clock).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import anyio
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.providers.llama_kv import (
    Span,
    evaluated_tokens,
    find_removed_span,
    trim_in_place,
)

# --- the span finder --------------------------------------------------------------

tokens = st.lists(st.integers(0, 3), max_size=40)


def reuse(old: Sequence[int], new: Sequence[int], span: Span | None) -> int:
    """How many of ``new``'s leading tokens the cache holds after the trim."""
    if span is None:
        n = 0
        while n < min(len(old), len(new)) and old[n] == new[n]:
            n += 1
        return n
    return span.start + span.kept


def longest_run(old: Sequence[int], new: Sequence[int], start: int) -> int:
    """Brute force: the most tokens of ``old`` after ``start`` that line up with
    ``new`` from ``start`` on."""
    best = 0
    for end in range(start + 1, len(old)):
        n = 0
        while end + n < len(old) and start + n < len(new) and old[end + n] == new[start + n]:
            n += 1
        best = max(best, n)
    return best


@settings(max_examples=400, deadline=None)
@given(tokens, tokens)
def test_a_span_found_always_lines_up_token_for_token(old: list[int], new: list[int]) -> None:
    span = find_removed_span(old, new, min_kept=1)
    if span is None:
        return
    assert 0 < span.start < span.end <= len(old) - span.kept
    assert old[: span.start] == new[: span.start]
    assert old[span.start] != new[span.start]  # it starts where they first differ
    assert old[span.end : span.end + span.kept] == new[span.start : span.start + span.kept]
    assert span.kept == longest_run(old, new, span.start)  # the best there is


@settings(max_examples=400, deadline=None)
@given(tokens, st.data())
def test_turns_cut_out_after_a_kept_start_are_found(old: list[int], data: st.DataObject) -> None:
    """new = old[:p0] + old[p1:q] + appended: the cache ends up holding at least
    the p0 + (q - p1) tokens the cut left in place."""
    p0 = data.draw(st.integers(1, max(1, len(old))))
    p1 = data.draw(st.integers(p0, max(p0, len(old))))
    q = data.draw(st.integers(p1, max(p1, len(old))))
    appended = data.draw(tokens)
    new = old[:p0] + old[p1:q] + appended
    span = find_removed_span(old, new, min_kept=1)
    assert reuse(old, new, span) >= min(len(old), p0) + (q - p1) or (span is None and q == p1)


def test_too_short_a_run_is_not_worth_a_shift() -> None:
    old = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    new = [1, 2, 6, 7, 8, 9, 10, 11]
    assert find_removed_span(old, new, min_kept=4) == Span(2, 5, 4)
    assert find_removed_span(old, new, min_kept=5) is None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ([1, 2, 3], [1, 2, 3, 4]),  # appended: llama.cpp's own prefix reuse does it
        ([1, 2, 3], [1, 2]),  # a prefix
        ([1, 2, 3], [9, 2, 3]),  # nothing kept at the start
        ([], [1]),
        ([1, 2, 3, 4], [1, 5, 6, 7]),  # nothing of the rest lines up
    ],
)
def test_no_span_when_nothing_is_cut_out(old: list[int], new: list[int]) -> None:
    assert find_removed_span(old, new, min_kept=1) is None


def test_another_version_of_llama_cpp_python_is_read_again_in_full() -> None:
    """A Llama without the attributes this module was written against is left alone."""
    llama = SimpleNamespace(n_tokens=5, input_ids=np.arange(5, dtype=np.intc))
    result = trim_in_place(llama, [0, 1, 3, 4], min_kept=1)
    assert result.span is None and result.reason == "unsupported llama-cpp-python"
    assert llama.n_tokens == 5


def test_a_recurrent_model_is_read_again_in_full() -> None:
    llama = SimpleNamespace(
        _ctx=SimpleNamespace(memory=None),
        input_ids=np.arange(5, dtype=np.intc),
        n_tokens=5,
        scores=None,
        _logits_all=False,
        _requires_eval=False,
        _is_recurrent=True,
    )
    assert trim_in_place(llama, [0, 1, 3, 4], min_kept=1).reason == "recurrent model"
    assert llama.n_tokens == 5


# --- on the real model ------------------------------------------------------------

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

from voice_membrane.membrane.membrane import Membrane  # noqa: E402
from voice_membrane.pipeline.history import SourceTokens  # noqa: E402
from voice_membrane.pipeline.session import Session  # noqa: E402
from voice_membrane.providers.base import ChatMessage  # noqa: E402
from voice_membrane.providers.local_llama import LocalLlama  # noqa: E402
from voice_membrane.providers.text_source import TextSourceProvider  # noqa: E402
from voice_membrane.sinks.null import NullSink  # noqa: E402
from voice_membrane.testing.silent_engine import SilentEngine  # noqa: E402

REPLY_TOKENS = 8


def conversation(first: int, last: int, asked: str) -> list[ChatMessage]:
    """Turns ``first`` to ``last`` (excluded), each a question and its answer, then ``asked``."""
    messages: list[ChatMessage] = []
    for n in range(first, last):
        messages.append(ChatMessage("user", f"Question {n}: what colour is fruit number {n}?"))
        messages.append(ChatMessage("assistant", f"Fruit number {n} is green with {n} stripes."))
    return [*messages, ChatMessage("user", asked)]


def source(**options: object) -> LocalLlama:
    src = LocalLlama(max_tokens=REPLY_TOKENS, temperature=0.0, seed=0, **options)  # type: ignore[arg-type]
    anyio.run(src.start)
    return src


def reply(src: LocalLlama, messages: list[ChatMessage]) -> tuple[str, int]:
    """The reply, and how many tokens llama.cpp evaluated for it (prompt and reply)."""
    before = evaluated_tokens(src.model.llama)

    async def run() -> str:
        return "".join([d async for d in src.stream(messages)])

    text = anyio.run(run)
    return text, evaluated_tokens(src.model.llama) - before


def prompt_ids(src: LocalLlama, messages: list[ChatMessage]) -> list[int]:
    ids = src.model.prompt_token_ids(src.messages_for(messages))
    assert ids is not None
    return ids


def test_a_trimmed_conversation_evaluates_only_its_new_turn() -> None:
    src = source()
    reply(src, conversation(0, 12, "Question 12?"))
    trimmed = conversation(4, 13, "Question 13: and the next one?")  # four turns dropped
    text, evaluated = reply(src, trimmed)
    span = src.model.cache.last.span  # type: ignore[union-attr]
    assert span is not None, src.model.cache.last
    prompt = prompt_ids(src, trimmed)
    tail = len(prompt) - (span.start + span.kept)
    assert 0 < tail < 60  # question 12's reply as heard and question 13
    assert evaluated <= tail + REPLY_TOKENS + 1
    assert len(prompt) - span.start > 300  # what a full re-read would have evaluated
    assert text.strip()


def test_the_old_path_reads_a_trimmed_conversation_again() -> None:
    src = source(trim_in_place=False)
    reply(src, conversation(0, 12, "Question 12?"))
    trimmed = conversation(4, 13, "Question 13: and the next one?")
    text, evaluated = reply(src, trimmed)
    assert src.model.cache.last is not None and src.model.cache.last.reason == "off"
    system = len(prompt_ids(src, [ChatMessage("user", "")])) - 8  # the system prompt, about
    assert evaluated > len(prompt_ids(src, trimmed)) - system - 8
    assert text.strip()


def test_a_changed_conversation_is_read_again_from_where_it_changed() -> None:
    """Tokens that do not line up are never shifted into place: the kept turns were
    edited, so the cache is kept only up to the change."""
    src = source()
    reply(src, conversation(0, 12, "Question 12?"))
    edited = conversation(4, 13, "Question 13?")
    edited[0] = ChatMessage("user", "Something else entirely, asked in other words.")
    text, evaluated = reply(src, edited)
    last = src.model.cache.last
    assert last is not None and last.span is None and last.reason == "no span"
    assert evaluated > len(prompt_ids(src, edited)) - 60
    assert text.strip()


def test_a_trimmed_cache_predicts_what_a_full_read_predicts() -> None:
    """After the cut and the shift, the next-token scores are those of the same prompt
    read from scratch (to within the drift of keys computed with the dropped turns in
    front of them): a wrong shift or a wrong record of the cache would scatter them."""
    src = source()
    llama = src.model.llama
    reply(src, conversation(0, 12, "Question 12?"))
    trimmed = src.messages_for(conversation(4, 13, "Question 13?"))
    prompt = src.model.prompt_token_ids(trimmed)
    assert prompt is not None

    def logits_after(evaluate: list[int]) -> np.ndarray:
        llama.eval(evaluate)
        return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).copy()

    with src.model.lock:
        result = trim_in_place(llama, prompt)
        assert result.span is not None
        shifted = logits_after(prompt[llama.n_tokens :])
        llama.reset()
        fresh = logits_after(prompt)
        src.model.cache.owner = None  # the cache now holds neither conversation's reply
    assert int(shifted.argmax()) == int(fresh.argmax())
    assert np.corrcoef(shifted, fresh)[0, 1] > 0.98


def test_two_sessions_on_one_model_trim_only_their_own_cache() -> None:
    """Sessions sharing a model overwrite its cache: a session whose cache another
    one took reads its trimmed prompt again, even when the tokens would line up; its
    next trim, with its own cache back, is in place."""
    alice, bob = source(), source()
    assert alice.model is bob.model
    reply(alice, conversation(0, 12, "Question 12?"))
    reply(bob, conversation(0, 12, "Question 12?"))  # the same tokens, another session
    text, evaluated = reply(alice, conversation(4, 13, "Question 13?"))
    last = alice.model.cache.last
    assert last is not None and last.reason == "not this session's cache"
    assert evaluated > 300 and text.strip()
    reply(alice, conversation(4, 14, "Question 14?"))
    text, evaluated = reply(alice, conversation(8, 15, "Question 15?"))
    assert alice.model.cache.last is not None and alice.model.cache.last.span is not None
    assert evaluated < 80 and text.strip()
    text, evaluated = reply(bob, conversation(4, 13, "Question 13?"))
    assert bob.model.cache.last is not None and bob.model.cache.last.span is None
    assert evaluated > 300 and text.strip()


def test_a_long_session_trims_in_place_and_keeps_answering() -> None:
    """A session on the embedded model with a small budget: each turn that drops turns
    evaluates only its new text, and every turn is answered."""
    src = source()
    membrane = Membrane(TextSourceProvider(src))
    counter = SourceTokens(src, membrane.formatter, budget=320)
    session = Session(
        membrane, SilentEngine(), NullSink(), system_prompt="Be brief.", context=counter
    )
    trims: list[int] = []

    async def turns() -> None:
        async with session:
            dropped = 0
            for n in range(16):
                before = evaluated_tokens(src.model.llama)
                result = await session.turn(f"Question {n}: what colour is fruit number {n}?")
                assert result.error is None and result.spoken_text.strip()
                fitted = result.report.context
                assert fitted is not None and fitted.tokens <= counter.budget
                if fitted.dropped > dropped:
                    trims.append(evaluated_tokens(src.model.llama) - before)
                    assert src.model.cache.last is not None
                    assert src.model.cache.last.span is not None, src.model.cache.last
                dropped = fitted.dropped

    anyio.run(turns)
    assert len(trims) >= 2
    assert max(trims) < 80  # the new question, the last reply as heard, and the reply


def test_the_trim_check_does_not_tokenize_what_was_just_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """History fitting counts a request just before it is sent: the trim check takes
    that count's tokens instead of rendering and tokenizing the prompt again."""
    src = source()
    messages = conversation(0, 6, "Question 6?")
    reply(src, messages)  # the cache is this source's own: the check runs
    asked = conversation(0, 7, "Question 7?")
    llama = src.model.llama
    calls: list[bytes] = []
    tokenize = llama.tokenize

    def counting(text: bytes, *args: object, **kwargs: object) -> list[int]:
        calls.append(text)
        return tokenize(text, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(llama, "tokenize", counting)
    anyio.run(src.count_tokens, asked)
    reply(src, asked)
    assert src.model.cache.last is not None and src.model.cache.last.reason == "no span"
    assert len(calls) == 2  # the count, and llama.cpp's own in create_chat_completion


def test_a_trim_that_fails_midway_leaves_a_cache_read_again_in_full() -> None:
    """Internals that are not what the module expects (here ``input_ids`` gone after
    the check) never leave a cache whose record is wrong: it is forgotten."""
    src = source()
    reply(src, conversation(0, 12, "Question 12?"))
    llama = src.model.llama

    def broken() -> list[int]:
        raise AttributeError("input_ids")

    result = src.model.cache.fit(llama, src, True, broken)
    assert result.span is None and result.reason == "failed (AttributeError)"
    assert llama.n_tokens == 0
    text, evaluated = reply(src, conversation(4, 13, "Question 13?"))
    assert text.strip() and evaluated > 300
