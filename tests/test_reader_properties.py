"""The providers' response readers (sans-I/O) are stream transformers too: however
the server cuts the reply into chunks, they give the same logical output, and
thinking never comes out as visible text.

Thinking is written with the letters A, B and C, which visible text never uses,
so one of them in visible text is hidden content leaking.
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st
from native_events import assemble
from openai.types import Completion
from openai.types.chat import ChatCompletionChunk

from voice_membrane.parse import XmlStreamParser
from voice_membrane.providers.gemini_read import ChunkReader
from voice_membrane.providers.openai_read import ChatReader, TextReader
from voice_membrane.vocab.events import Chunk, Event, merge_adjacent_chunks
from voice_membrane.vocab.provider_output import ProviderOutput, StopInfo, TextDelta

Kind = Literal["thinking", "text"]
STOPS = ["\nUser:"]
EOT = "<|eot|>"
THOUGHT = st.text(alphabet="ABC .", min_size=1, max_size=12)
SPOKEN = st.one_of(
    st.text(alphabet="ab :\n", min_size=1, max_size=12),
    st.sampled_from(["\nUser:", "\nUs", EOT, "<|eo", "<|"]),
)
SEGMENTS = st.lists(
    st.one_of(st.tuples(st.just("thinking"), THOUGHT), st.tuples(st.just("text"), SPOKEN)),
    min_size=1,
    max_size=6,
)
CUTS = st.lists(st.integers(0, 80), max_size=8)


def cut(segments: list[tuple[Kind, str]], cuts: list[int]) -> list[tuple[Kind, str]]:
    """Each segment cut at the given points (taken modulo its length)."""
    pieces: list[tuple[Kind, str]] = []
    for kind, body in segments:
        points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
        pieces += [(kind, body[a:b]) for a, b in itertools.pairwise(points) if b > a]
    return pieces


def merged(items: list[ProviderOutput]) -> list[Event]:
    return merge_adjacent_chunks(assemble(items))


def visible_text(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, Chunk) and e.meta.visible)


# ------------------------------------------------------------------ OpenAI chat


def chat_chunk(kind: Kind, piece: str, finish: str | None = None) -> ChatCompletionChunk:
    field = "reasoning_content" if kind == "thinking" else "content"
    delta = {field: piece} if piece else {}
    return ChatCompletionChunk.model_validate(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def read_chat(pieces: list[tuple[Kind, str]]) -> list[ProviderOutput]:
    reader = ChatReader(STOPS)
    out: list[ProviderOutput] = []
    for chunk in [*(chat_chunk(k, p) for k, p in pieces), chat_chunk("text", "", "stop")]:
        out += reader.chunk(chunk)
        if reader.done:  # as the adapter does: a client-side stop ends the read
            break
    return out + reader.end()


@settings(max_examples=150, deadline=None)
@given(SEGMENTS, CUTS)
def test_openai_chat_reader_is_split_invariant_and_hides_reasoning(
    segments: list[tuple[Kind, str]], cuts: list[int]
) -> None:
    whole = read_chat(segments)
    assert merged(read_chat(cut(segments, cuts))) == merged(whole)
    assert whole[-1] == read_chat(cut(segments, cuts))[-1]  # the same StopInfo
    spoken = visible_text(merged(whole))
    assert not any(c in "ABC" for c in spoken), spoken
    assert "\nUser:" not in spoken


# ------------------------------------------------------------------ OpenAI legacy completions


def completion_chunk(piece: str, finish: str | None = None) -> Completion:
    # Built leniently, as the SDK builds streamed chunks (finish_reason null until the end).
    return Completion.construct(
        id="c",
        object="text_completion",
        created=0,
        model="m",
        choices=[{"index": 0, "text": piece, "finish_reason": finish, "logprobs": None}],
    )


def read_text(pieces: list[str]) -> tuple[str, StopInfo]:
    reader = TextReader(STOPS, EOT)
    out: list[ProviderOutput] = []
    for chunk in [*(completion_chunk(p) for p in pieces), completion_chunk("", "stop")]:
        out += reader.chunk(chunk)
        if reader.done:
            break
    out += reader.end()
    stop = out[-1]
    assert isinstance(stop, StopInfo)
    return "".join(i.text for i in out if isinstance(i, TextDelta)), stop


@settings(max_examples=150, deadline=None)
@given(st.lists(SPOKEN, min_size=1, max_size=6).map("".join), CUTS)
def test_openai_text_reader_cuts_at_the_first_stop_whatever_the_split(
    text: str, cuts: list[int]
) -> None:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in itertools.pairwise(points)]
    said, stop = read_text(pieces)
    assert (said, stop) == read_text([text])
    ends = {s: text.find(s) + len(s) for s in [*STOPS, EOT] if s in text}
    if ends:
        first = min(ends, key=ends.__getitem__)
        assert said == text[: text.find(first)]
        # Found client-side: the read ends there, before the server's finish_reason.
        if first == EOT:
            assert stop == StopInfo("end_turn")
        else:
            assert stop == StopInfo("stop_sequence", stop_sequence=first)
    else:
        assert said == text and stop.reason == "end_turn"


# ------------------------------------------------------------------ Gemini, prefill mode


def gemini_response(kind: Kind, piece: str, finish: str | None = None) -> Any:
    part: dict[str, Any] = {"text": piece}
    if kind == "thinking":
        part["thought"] = True
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}}
    if finish:
        candidate["finishReason"] = finish
    return types.GenerateContentResponse._from_response(
        response={"candidates": [candidate]}, kwargs={}
    )


def read_gemini_prefill(pieces: list[tuple[Kind, str]]) -> tuple[str, StopInfo]:
    reader = ChunkReader(True, [*STOPS, EOT], EOT, itertools.count(1))
    out: list[ProviderOutput] = []
    responses = [*(gemini_response(k, p) for k, p in pieces), gemini_response("text", "", "STOP")]
    for response in responses:
        out += reader.read(response)
        if reader.done:
            break
    out += reader.end(complete=True)
    stop = out[-1]
    assert isinstance(stop, StopInfo)
    return "".join(i.text for i in out if isinstance(i, TextDelta)), stop


@settings(max_examples=150, deadline=None)
@given(SEGMENTS, CUTS)
def test_gemini_prefill_reader_is_split_invariant_and_its_thinking_stays_hidden(
    segments: list[tuple[Kind, str]], cuts: list[int]
) -> None:
    wire, stop = read_gemini_prefill(segments)
    assert read_gemini_prefill(cut(segments, cuts)) == (wire, stop)
    assert EOT not in wire and "\nUser:" not in wire
    # What Membrane does next: the XML parser over the text; thoughts stay hidden.
    parser = XmlStreamParser()
    events = [*parser.feed(wire), *parser.flush()]
    spoken = visible_text(merge_adjacent_chunks(events))
    assert not any(c in "ABC" for c in spoken), spoken
