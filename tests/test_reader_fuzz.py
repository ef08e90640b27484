"""Each vendor's adapter and reader fuzzed with generated event streams — valid,
truncated, mistyped, unknown events — built into the SDK's own objects the way
the SDK builds them (OpenAI's: served as the SSE body its adapter reads), and
run through ``Membrane``: no exception escapes (a
failure is a ``ReplyError``), the reply always ends with a ``ReplyResult``, and
nothing but text-block text is ever visible.

Text-block text is written with the letters a and b; thinking, tool input,
names, ids and unknown fields with capitals, which visible text never holds. A
lone surrogate may appear anywhere and must come out as U+FFFD.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
from anthropic._models import construct_type as anthropic_construct
from anthropic.types import RawMessageStreamEvent
from google.genai import types as gemini_types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voice_membrane.membrane.membrane import Membrane
from voice_membrane.membrane.reply import MembraneItem, ReplyError, ReplyResult
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.providers.base import Provider
from voice_membrane.providers.gemini import GeminiProvider
from voice_membrane.providers.openai import OpenAIProvider
from voice_membrane.vendors.retry import NO_RETRY
from voice_membrane.vocab.events import Chunk
from voice_membrane.vocab.messages import Message, ModelConfig, Request

SPOKEN = st.text(alphabet="ab \n\ud83d", max_size=6)  # text-block text
HIDDEN = st.text(alphabet="ABCQ \ud83d", max_size=6)  # everything else
VISIBLE_CHARS = set("ab \n\ufffd")
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | HIDDEN,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(HIDDEN, inner, max_size=2),
    max_leaves=4,
)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def sometimes_wrong(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field's value: usually well typed, sometimes any JSON at all."""
    return st.one_of(good, good, good, ANY_JSON)


def sometimes_mistyped(spoken: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """A visible text field's value: its text, or JSON of another type. (A string
    there is text to speak, whatever its letters: it cannot come from ``HIDDEN``.)"""
    return st.one_of(spoken, spoken, spoken, ANY_JSON.filter(lambda v: not isinstance(v, str)))


class Events:
    """An SDK response stream over prebuilt items (``close`` as the SDK's)."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        for item in self.items:
            yield item

    async def close(self) -> None:
        pass


def run(provider: Provider, formatter: str) -> list[MembraneItem]:
    request = Request(
        messages=[Message(participant="User", content="Hi")],
        config=ModelConfig(model="m", max_tokens=64),
    )

    async def collect() -> list[MembraneItem]:
        membrane = Membrane(provider, formatter, retry=NO_RETRY)  # a retry would sleep
        return [item async for item in membrane.stream(request)]

    return anyio.run(collect)


def check(items: list[MembraneItem]) -> None:
    assert isinstance(items[-1], ReplyResult)
    assert all(
        not isinstance(i, ReplyError) or i.kind == "stream" or i.kind == "connection" for i in items
    )
    spoken = "".join(i.text for i in items if isinstance(i, Chunk) and i.meta.visible)
    assert set(spoken) <= VISIBLE_CHARS, spoken


class Stub:
    """An attribute bag standing in for an SDK client."""

    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)


# ------------------------------------------------------------------ Anthropic

BLOCK_START = st.fixed_dictionaries(
    {
        "type": sometimes_wrong(
            st.sampled_from(
                ["text", "thinking", "redacted_thinking", "tool_use", "server_tool_use", "new"]
            )
        ),
        "text": sometimes_mistyped(st.just("")),  # a text block's first text is spoken
        "thinking": sometimes_wrong(HIDDEN),
        "signature": sometimes_wrong(HIDDEN),
        "data": sometimes_wrong(HIDDEN),
        "id": sometimes_wrong(st.sampled_from(["", "ID1"])),
        "name": sometimes_wrong(st.sampled_from(["", "QQ"])),
        "input": sometimes_wrong(st.dictionaries(HIDDEN, HIDDEN, max_size=1)),
    }
)


@st.composite
def anthropic_delta(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(
        sometimes_wrong(
            st.sampled_from(
                [
                    "text_delta",
                    "thinking_delta",
                    "input_json_delta",
                    "signature_delta",
                    "citations_delta",
                    "new_delta",
                ]
            )
        )
    )
    field, value = (
        {
            "text_delta": ("text", SPOKEN),
            "thinking_delta": ("thinking", HIDDEN),
            "input_json_delta": ("partial_json", st.sampled_from(['{"Q": ', "1}", "QQ"])),
            "signature_delta": ("signature", HIDDEN),
        }.get(kind, ("text", HIDDEN))
        if isinstance(kind, str)
        else ("text", HIDDEN)
    )
    spoken = kind == "text_delta"  # its text is spoken, whatever its letters
    return {
        "type": kind,
        field: draw(sometimes_mistyped(value) if spoken else sometimes_wrong(value)),
    }


ANTHROPIC_EVENT = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("message_start"),
            "message": sometimes_wrong(
                st.fixed_dictionaries({"usage": sometimes_wrong(st.just({"input_tokens": 3}))})
            ),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("content_block_start"), "content_block": sometimes_wrong(BLOCK_START)}
    ),
    st.fixed_dictionaries(
        {"type": st.just("content_block_delta"), "delta": sometimes_wrong(anthropic_delta())}
    ),
    st.just({"type": "content_block_stop", "index": 0}),
    st.fixed_dictionaries(
        {
            "type": st.just("message_delta"),
            "delta": sometimes_wrong(
                st.fixed_dictionaries({"stop_reason": sometimes_wrong(st.just("end_turn"))})
            ),
            "usage": sometimes_wrong(st.just({"output_tokens": 5})),
        }
    ),
    st.just({"type": "ping"}),
    st.fixed_dictionaries({"type": sometimes_wrong(st.just("brand_new_event"))}),
    ANY_JSON,
)


def anthropic_stream(events: list[Any], complete: bool) -> list[Any]:
    wire = [*events, {"type": "message_stop"}] if complete else events
    return [anthropic_construct(type_=RawMessageStreamEvent, value=e) for e in wire]


@SETTINGS
@given(
    st.lists(ANTHROPIC_EVENT, max_size=12),
    st.booleans(),
    st.sampled_from(["native", "anthropic-xml"]),
)
def test_anthropic_reader_survives_any_event_stream(
    events: list[Any], complete: bool, formatter: str
) -> None:
    provider = AnthropicProvider(api_key="k")
    stream = Events(anthropic_stream(events, complete))

    async def create(*_: Any, **__: Any) -> Events:
        return stream

    provider._client = Stub(  # type: ignore[assignment]
        api_key="k",
        auth_token=None,
        credentials=None,
        base_url="stub",
        messages=Stub(create=create),
        post=create,  # (the streaming path posts its body through the client)
    )
    check(run(provider, formatter))


# ------------------------------------------------------------------ OpenAI

OPENAI_CALL = st.fixed_dictionaries(
    {
        "index": sometimes_wrong(st.integers(0, 2)),
        "id": sometimes_wrong(st.sampled_from(["", "ID1", "ID2"])),
        "function": sometimes_wrong(
            st.fixed_dictionaries(
                {
                    "name": sometimes_wrong(st.sampled_from(["", "QQ"])),
                    "arguments": sometimes_wrong(st.sampled_from(['{"Q": ', "1}", "QQ"])),
                }
            )
        ),
    }
)
OPENAI_DELTA = st.fixed_dictionaries(
    {},
    optional={
        "content": sometimes_mistyped(SPOKEN),
        "reasoning_content": sometimes_wrong(HIDDEN),
        "refusal": sometimes_mistyped(SPOKEN),
        "tool_calls": sometimes_wrong(st.lists(OPENAI_CALL, max_size=2)),
        "new_field": ANY_JSON,
    },
)
OPENAI_CHUNK = st.one_of(
    st.fixed_dictionaries(
        {
            "object": st.just("chat.completion.chunk"),
            "choices": sometimes_wrong(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "delta": sometimes_wrong(OPENAI_DELTA),
                            "finish_reason": sometimes_wrong(st.sampled_from([None, "stop"])),
                        }
                    ),
                    max_size=1,
                )
            ),
            "usage": sometimes_wrong(st.just({"prompt_tokens": 3, "completion_tokens": 2})),
        }
    ),
    st.fixed_dictionaries({"object": sometimes_wrong(st.just("new.object"))}),
    ANY_JSON,
)


def sse_response(chunks: list[Any]) -> httpx2.Response:
    """The raw streaming response the SDK's ``post`` returns, over prebuilt chunks
    as ``data:`` events (the adapter reads the body itself: ``vendors/openai_stream.py``)."""
    body = b"".join(b"data: %s\n\n" % json.dumps(c).encode() for c in chunks)
    request = httpx2.Request("POST", "http://stub/v1/chat/completions")
    return httpx2.Response(200, content=Events([body, b"data: [DONE]\n\n"]), request=request)


@SETTINGS
@given(st.lists(OPENAI_CHUNK, max_size=10))
def test_openai_reader_survives_any_chunk_stream(chunks: list[Any]) -> None:
    provider = OpenAIProvider(api_key="k")

    async def post(path: str, **_: Any) -> httpx2.Response:
        assert path == "/chat/completions"
        return sse_response(chunks)

    provider._client = Stub(base_url="stub", post=post)  # type: ignore[assignment]
    check(run(provider, "native"))


# ------------------------------------------------------------------ Gemini

GEMINI_PART = st.fixed_dictionaries(
    {},
    optional={
        "text": sometimes_mistyped(SPOKEN),
        "thought": sometimes_wrong(st.booleans()),
        "functionCall": sometimes_wrong(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": sometimes_wrong(st.sampled_from(["", "QQ"])),
                    "id": sometimes_wrong(st.sampled_from(["", "ID1"])),
                    "args": sometimes_wrong(st.dictionaries(HIDDEN, HIDDEN, max_size=1)),
                },
            )
        ),
        "executableCode": st.just({"code": "QQ", "language": "PYTHON"}),
        "newPartKind": ANY_JSON,
    },
)
GEMINI_CHUNK = st.one_of(
    st.fixed_dictionaries(
        {
            "candidates": sometimes_wrong(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "content": sometimes_wrong(
                                st.fixed_dictionaries(
                                    {"parts": sometimes_wrong(st.lists(GEMINI_PART, max_size=2))}
                                )
                            ),
                        },
                        optional={"finishReason": sometimes_wrong(st.just("STOP"))},
                    ),
                    max_size=1,
                )
            ),
        },
        optional={"usageMetadata": sometimes_wrong(st.just({"promptTokenCount": 3}))},
    ),
    st.fixed_dictionaries({"newTopLevel": ANY_JSON}),
)


@SETTINGS
@given(st.lists(GEMINI_CHUNK, max_size=8), st.sampled_from(["native", "gemini-prefill"]))
def test_gemini_reader_survives_any_chunk_stream(chunks: list[Any], formatter: str) -> None:
    provider = GeminiProvider(api_key="k")

    async def parsed() -> AsyncIterator[Any]:
        for chunk in chunks:  # parsed as the SDK parses each streamed chunk
            response = copy.deepcopy(chunk)  # the SDK strips unknown fields in place
            yield gemini_types.GenerateContentResponse._from_response(response=response, kwargs={})

    async def generate_content_stream(**_: Any) -> AsyncIterator[Any]:
        return parsed()

    provider._client = Stub(  # type: ignore[assignment]
        aio=Stub(models=Stub(generate_content_stream=generate_content_stream))
    )
    check(run(provider, formatter))
