"""The OpenAI adapter's streamed body read as dicts (``vendors/openai_stream.py``,
``vendors/sse.py``) against the SDK's own path (``AsyncStream`` building a
pydantic chunk per event, the adapter's path before): the same items and the
same error on every stream the fake serves — tool calls, usage, finish reasons,
client-side stops, legacy Completions, unknown and mistyped chunks, an error
mid-stream, a malformed JSON line, bytes that are not UTF-8, a dropped
connection. And the SSE reader alone: whatever the reads' split, the events the
SDK's decoder finds; a bad line raises only after the events before it."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from voice_membrane.formats.base import BuiltRequest, ProviderMessage
from voice_membrane.providers.openai import OpenAIProvider
from voice_membrane.providers.openai_read import ChatReader, TextReader
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import (
    Fault,
    RawEvent,
    ScriptedReply,
    text,
    thinking,
    tool_use,
)
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vendors.openai_client import STREAM_ERRORS, provider_error
from voice_membrane.vendors.openai_stream import ChunkDecoder
from voice_membrane.vendors.sse import SseDecoder, SseEvent
from voice_membrane.vocab.messages import ModelConfig, TextContent
from voice_membrane.vocab.provider_output import ProviderOutput

CONFIG = ModelConfig(model="gpt-test", max_tokens=300)
HELLO = [ProviderMessage("user", [TextContent(text="Weather in Paris and Rome?")])]
CHAT = BuiltRequest("chat", HELLO, system="Be brief.")
PREFILL = BuiltRequest("prefill", [], prompt="User: Hi\n\nBob:", stop_sequences=["\n\nUser:"])
HEAD = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
Outcome = tuple[list[ProviderOutput], tuple[str, str, int | None] | None]


def chunk(delta: Any) -> dict[str, Any]:
    return {**HEAD, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


async def dict_path(server: FakeOpenAI, built: BuiltRequest) -> Outcome:
    """What the adapter yields now, and the error that ended it."""
    provider = OpenAIProvider(api_key="fake-key", base_url=server.base_url)
    items: list[ProviderOutput] = []
    try:
        async for item in provider.stream(built, CONFIG):
            items.append(item)
    except ProviderError as exc:
        return items, (exc.kind, exc.detail, exc.status)
    finally:
        await provider.aclose()
    return items, None


async def sdk_path(server: FakeOpenAI, built: BuiltRequest) -> Outcome:
    """The adapter's loop before: the SDK's stream of pydantic chunks, read by
    the same readers, its errors mapped by the same function."""
    provider = OpenAIProvider(api_key="fake-key", base_url=server.base_url)
    client = provider.client()
    kwargs = provider.request_body(built, CONFIG)
    reader: ChatReader | TextReader
    if built.mode == "chat":
        reader, create = ChatReader(built.stop_sequences), client.chat.completions.create
    else:
        reader = TextReader(built.stop_sequences, built.end_of_turn)
        create = client.completions.create  # type: ignore[assignment]
    items: list[ProviderOutput] = []
    try:
        stream: Any = await create(**kwargs)
        try:
            async for sdk_chunk in stream:
                items += reader.chunk(sdk_chunk)
                if reader.done:
                    break
        finally:
            await stream.close()
        items += reader.end()
    except STREAM_ERRORS as exc:
        error = provider_error(exc).at(str(client.base_url))
        return items, (error.kind, error.detail, error.status)
    finally:
        await provider.aclose()
    return items, None


REPLIES: dict[str, tuple[ScriptedReply, BuiltRequest, dict[str, Any]]] = {
    "tools_usage_reasoning": (
        ScriptedReply.of(
            thinking("Paris first."),
            text("Checking both."),
            tool_use("get_weather", {"city": "Paris"}, id="call_a"),
            tool_use("get_weather", {"city": "Rome"}, id="call_b"),
            delta_chars=3,
        ),
        CHAT,
        {},
    ),
    "openrouter_reasoning": (
        ScriptedReply.of(thinking("Hm."), "Yes.", delta_chars=2),
        CHAT,
        {"reasoning_field": "reasoning"},
    ),
    "max_tokens": (ScriptedReply.of("Cut short", stop_reason="max_tokens"), CHAT, {}),
    "client_side_stop": (
        ScriptedReply.of("One two. ENDING here.", delta_chars=3),
        BuiltRequest("chat", HELLO, stop_sequences=["<a>", "<b>", "<c>", "<d>", "END"]),
        {},
    ),
    "legacy_leaked_stop": (
        ScriptedReply.of(" Hello there.", stop_reason="stop_sequence", delta_chars=3),
        PREFILL,
        {"leak_stop": True, "stop_field": "stopping_word"},
    ),
    "legacy_named_stop": (
        ScriptedReply.of(" Hi.", stop_reason="stop_sequence"),
        PREFILL,
        {"stop_field": "stop_reason"},
    ),
    "unknown_and_mistyped_chunks": (
        ScriptedReply.of(
            thinking("Plan."),
            "Hello there.",
            delta_chars=6,
            raw=(
                RawEvent({"object": "brand.new.object", "whatever": [1]}, 1, "brand_new"),
                RawEvent({"object": "thread.run", "choices": "x"}, 1, "thread.run.created"),
                RawEvent(chunk({"content": 42}), 2),
                RawEvent(chunk("not an object"), 2),
                RawEvent({**HEAD, "choices": {"0": "not a list"}}, 2),
                RawEvent([1, 2, {"choices": []}], 2),
                RawEvent(chunk({"content": " \ud83d"}), 2),
                RawEvent(chunk({"tool_calls": [{"index": "0", "function": 7}]}), 3),
                RawEvent(b": keep-alive comment\r\n\r\n", 3),
                RawEvent(b"data: " + json.dumps(chunk({"content": "!"})).encode() + b"\r\r", 3),
            ),
        ),
        CHAT,
        {},
    ),
    "numbers_as_strings": (
        ScriptedReply.of(
            "Hi there.",
            delta_chars=3,
            raw=(
                RawEvent(chunk({"tool_calls": [{"index": "1", "id": "c9", "function": {}}]}), 1),
                RawEvent({**HEAD, "choices": [], "usage": {"prompt_tokens": "7"}}, 2),
            ),
        ),
        CHAT,
        {},
    ),
    "error_mid_stream": (
        ScriptedReply.of(
            "abcdefghij", delta_chars=2, fault=Fault("error_event", 3, 429, message="slow")
        ),
        CHAT,
        {},
    ),
    "error_without_message": (
        ScriptedReply.of("abcdef", delta_chars=2, raw=(RawEvent({"error": {"code": 503}}, 2),)),
        CHAT,
        {},
    ),
    "malformed_json": (
        ScriptedReply.of("abcdef", delta_chars=2, fault=Fault("malformed", after_deltas=1)),
        CHAT,
        {},
    ),
    "not_utf8": (
        ScriptedReply.of("Hello there.", delta_chars=4, raw=(RawEvent(b"data: \xff\xfe\n\n", 2),)),
        CHAT,
        {},
    ),
    "dropped": (
        ScriptedReply.of("abcdef", delta_chars=2, fault=Fault("drop", after_deltas=2)),
        CHAT,
        {},
    ),
    "http_429": (ScriptedReply.http_error(429, retry_after=2, message="later"), CHAT, {}),
}


@pytest.mark.anyio
@pytest.mark.parametrize("name", REPLIES)
async def test_dicts_give_what_the_sdk_objects_gave(name: str) -> None:
    reply, built, options = REPLIES[name]
    with FakeOpenAI(reply, reply, **options) as fake:
        old = await sdk_path(fake, built)
        new = await dict_path(fake, built)
    assert new == old
    items, error = new
    assert items or error is not None
    if name in ("malformed_json", "error_mid_stream", "dropped", "not_utf8"):
        assert error is not None and items  # what came before the error is kept


@pytest.mark.anyio
async def test_the_connection_serves_the_next_reply() -> None:
    """The bytes after ``[DONE]`` are read (as the SDK does), so the connection
    goes back to the pool: the next turn pays no new connection."""
    reply = ScriptedReply.of("Hi there.", delta_chars=3)
    with FakeOpenAI(reply, reply, reply) as fake:
        provider = OpenAIProvider(api_key="fake-key", base_url=fake.base_url)
        for _ in range(3):
            assert [item async for item in provider.stream(CHAT, CONFIG)]
        await provider.aclose()
    peers = {request.peer for request in fake.requests}
    assert len(peers) == 1 and None not in peers


# ------------------------------------------------------------------ the SSE reader

LINE_ENDS = st.sampled_from(["\n", "\r", "\r\n"])
VALUE = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]))


@st.composite
def event_streams(draw: st.DrawFn) -> bytes:
    """Events of one or more data lines (maybe an ``event`` field, comments,
    unknown fields), each line ended by any of the three line ends."""
    out: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        lines = [
            f"data:{draw(st.sampled_from(['', ' ']))}{v}"
            for v in draw(st.lists(VALUE, min_size=1, max_size=3))
        ]
        if draw(st.booleans()):
            lines.insert(draw(st.integers(0, len(lines))), f"event: {draw(VALUE)}")
        if draw(st.booleans()):
            lines.insert(0, f":{draw(VALUE)}")
        if draw(st.booleans()):
            lines.append(f"other: {draw(VALUE)}")
        out += [line + draw(LINE_ENDS) for line in [*lines, ""]]
    return "".join(out).encode()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def decode(pieces: list[bytes]) -> list[SseEvent]:
    decoder = SseDecoder()
    events = [event for piece in pieces for event in decoder.feed(piece)]
    decoder.end()
    return events


@given(event_streams(), st.lists(st.integers(0, 400), max_size=8))
def test_sse_any_split_gives_the_sdk_decoders_events(data: bytes, cuts: list[int]) -> None:
    sdk = [(e.event, e.data) for e in SSEDecoder().iter_bytes(iter([data]))]
    assert [(e.event, e.data) for e in decode([data])] == sdk
    assert decode(split(data, cuts)) == decode([data])  # re-chunking never changes output


def test_sse_a_crlf_split_between_reads_is_one_line_end() -> None:
    assert decode([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]) == [SseEvent("a\nb")]
    assert decode([b"data: a\r", b"\r"]) == [SseEvent("a")]


def test_sse_events_without_data_and_unended_events_are_not_dispatched() -> None:
    assert decode([b"event: ping\n\n: comment\n\nid: 7\nretry: 10\n\n"]) == []
    assert decode([b"data: whole\n\ndata: cut off"]) == [SseEvent("whole")]
    assert decode([b"event: named\ndata:x\n\n"]) == [SseEvent("x", "named")]


def test_sse_a_line_that_is_not_utf8_raises_after_the_events_before_it() -> None:
    decoder = SseDecoder()
    events = decoder.feed(b"data: 1\n\ndata: \xff\n\ndata: 3\n\n")
    assert next(events) == SseEvent("1")
    with pytest.raises(UnicodeDecodeError):
        next(events)
    decoder = SseDecoder()
    assert list(decoder.feed(b"data: \xff")) == []  # a line not ended yet is not read yet
    with pytest.raises(UnicodeDecodeError):
        decoder.end()


# ------------------------------------------------------------------ chunks

REQUEST = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")


def test_chunks_before_a_bad_one_in_the_same_read_are_kept() -> None:
    decoder = ChunkDecoder(REQUEST)
    read = decoder.feed(b'data: {"a": 1}\n\ndata: [1]\n\ndata: {not json\n\ndata: {"b": 2}\n\n')
    assert next(read) == {"a": 1} and next(read) == [1]
    with pytest.raises(json.JSONDecodeError):
        next(read)


def test_in_stream_error_and_done() -> None:
    decoder = ChunkDecoder(REQUEST)
    read = decoder.feed(b'data: {"a": 1}\n\ndata: {"error": {"message": "boom", "code": 500}}\n\n')
    assert next(read) == {"a": 1}
    with pytest.raises(Exception) as caught:
        next(read)
    error = provider_error(caught.value)
    assert (error.kind, error.detail) == ("server", "boom")
    decoder = ChunkDecoder(REQUEST)
    assert list(decoder.feed(b'data: {"a": 1}\n\ndata: [DONE]\n\ndata: {"b": 2}\n\n')) == [{"a": 1}]
    assert decoder.ended and list(decoder.feed(b'data: {"c": 3}\n\n')) == []
