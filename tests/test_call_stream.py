"""``CallStream``: the deltas that have arrived are read as one, nothing waits
for one that has not, each output is seen as it came, and a step read ahead is
cancelled or its error raised in order. Over a real SDK and the fake server
too: the reply is the same, in fewer pieces, and the token count is the
deltas'."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.membrane.call_stream import JOINED_MOST, CallStream
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.parse.policy import PolicyContext, StreamPolicy, StreamState
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.script import ScriptedReply
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vendors.retry import FirstTokenDeadline, StallDeadline
from voice_membrane.vocab.events import Chunk, Event
from voice_membrane.vocab.messages import Message, ModelConfig, Request
from voice_membrane.vocab.provider_output import (
    NativeDelta,
    NativeStart,
    ProviderOutput,
    TextDelta,
)

pytestmark = pytest.mark.anyio

# What the source does next: yield an output at once, or wait a loop pass first.
Step = tuple[str, ProviderOutput]


class Source:
    """A provider's outputs, each ready or arriving after a wait; counts how far
    it was read and whether it was closed."""

    def __init__(self, steps: Sequence[Step], error: Exception | None = None) -> None:
        self.steps, self.error = list(steps), error
        self.read = 0
        self.closed = False
        self.arrive = anyio.Event()  # a "later" step waits for it, when asked to

    async def outputs(self, waits_for_event: bool = False) -> AsyncIterator[ProviderOutput]:
        try:
            for when, output in self.steps:
                if when == "later":
                    if waits_for_event:
                        await self.arrive.wait()
                    else:
                        await anyio.sleep(0)
                self.read += 1
                yield output
            if self.error is not None:
                raise self.error
        finally:
            self.closed = True


def stream_of(
    source: Source,
    seen: list[ProviderOutput],
    *,
    one_at_a_time: bool = False,
    waits_for_event: bool = False,
) -> tuple[CallStream, AsyncIterator[ProviderOutput]]:
    outputs = source.outputs(waits_for_event)

    def arrived(output: ProviderOutput) -> ProviderOutput:
        seen.append(output)
        return output

    deadline = FirstTokenDeadline.starting(5.0, anyio.current_time())
    stream = CallStream(outputs, deadline, StallDeadline(5.0), arrived, one_at_a_time=one_at_a_time)
    return stream, outputs


async def read_all(stream: CallStream) -> list[ProviderOutput]:
    got: list[ProviderOutput] = []
    with anyio.fail_after(5):
        while (output := await stream.next()) is not None:
            got.append(output)
    return got


async def test_ready_deltas_are_read_as_one_and_each_is_seen() -> None:
    steps: list[Step] = [
        ("now", NativeStart("text")),
        ("now", NativeDelta("Hel")),
        ("now", NativeDelta("lo ")),
        ("now", NativeDelta("the")),
        ("later", NativeDelta("re.")),
        ("now", NativeDelta(" Bye")),
    ]
    seen: list[ProviderOutput] = []
    stream, _ = stream_of(Source(steps), seen)
    got = await read_all(stream)
    assert got == [NativeStart("text"), NativeDelta("Hello the"), NativeDelta("re. Bye")]
    assert seen == [output for _, output in steps]  # on its own, in order


async def test_a_delta_not_yet_arrived_is_not_waited_for() -> None:
    source = Source([("now", NativeDelta("Hi")), ("later", NativeDelta(" there"))])
    seen: list[ProviderOutput] = []
    stream, _ = stream_of(source, seen, waits_for_event=True)
    with anyio.fail_after(5):
        assert await stream.next() == NativeDelta("Hi")  # while " there" has not come
    source.arrive.set()
    with anyio.fail_after(5):
        assert await stream.next() == NativeDelta(" there")
        assert await stream.next() is None


async def test_kinds_are_not_mixed_and_a_run_is_cut_at_its_most() -> None:
    steps: list[Step] = [("now", NativeDelta("a")), ("now", TextDelta("b"))]
    steps += [("now", NativeDelta(str(n % 10))) for n in range(2 * JOINED_MOST + 3)]
    stream, _ = stream_of(Source(steps), [])
    got = await read_all(stream)
    assert got[:2] == [NativeDelta("a"), TextDelta("b")]
    lengths = [len(output.text) for output in got[2:]]  # type: ignore[union-attr]
    assert lengths == [JOINED_MOST, JOINED_MOST, 3]


async def test_one_at_a_time_reads_nothing_ahead() -> None:
    source = Source([("now", NativeDelta("a")), ("now", NativeDelta("b"))])
    stream, _ = stream_of(source, [], one_at_a_time=True)
    assert await stream.next() == NativeDelta("a")
    assert source.read == 1
    assert await stream.next() == NativeDelta("b")


async def test_an_error_met_reading_ahead_comes_after_what_came_before_it() -> None:
    error = ProviderError("anthropic", "stream", "the connection dropped")
    source = Source([("now", NativeDelta("Kept ")), ("now", NativeDelta("this"))], error)
    stream, _ = stream_of(source, [])
    assert await stream.next() == NativeDelta("Kept this")
    with pytest.raises(ProviderError, match="the connection dropped"):
        await stream.next()


async def test_a_step_read_ahead_is_cancelled_and_the_source_closes() -> None:
    source = Source([("now", NativeDelta("Hi")), ("later", NativeDelta(" never"))])
    stream, outputs = stream_of(source, [], waits_for_event=True)
    assert await stream.next() == NativeDelta("Hi")  # the step behind it waits
    with anyio.fail_after(5):
        await stream.abandon()
        await outputs.aclose()  # type: ignore[attr-defined]
    assert source.closed and source.read == 1


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["now", "later"]),
            st.sampled_from(["native", "text", "start"]),
            st.text(min_size=1, max_size=5),
        ),
        max_size=60,
    )
)
def test_any_arrival_reads_the_same_outputs_in_order(steps: list[tuple[str, str, str]]) -> None:
    """Whatever arrives together: the same text per run of one kind, nothing
    across a block's start, each output seen once, no run past its most."""

    def output(kind: str, text: str) -> ProviderOutput:
        if kind == "start":
            return NativeStart("text")
        return NativeDelta(text) if kind == "native" else TextDelta(text)

    made: list[Step] = [(when, output(kind, text)) for when, kind, text in steps]

    async def main() -> tuple[list[ProviderOutput], list[ProviderOutput]]:
        seen: list[ProviderOutput] = []
        stream, _ = stream_of(Source(made), seen)
        return await read_all(stream), seen

    got, seen = anyio.run(main)
    assert seen == [o for _, o in made]
    assert _runs(got) == _runs([o for _, o in made])
    for out in got:
        if isinstance(out, NativeDelta | TextDelta):
            assert len(out.text) <= 5 * JOINED_MOST


def _runs(outputs: Sequence[ProviderOutput]) -> list[Any]:
    """The outputs with each run of one delta kind as its joined text."""
    runs: list[Any] = []
    for out in outputs:
        if isinstance(out, NativeDelta | TextDelta):
            if runs and isinstance(runs[-1], tuple) and runs[-1][0] is type(out):
                runs[-1] = (type(out), runs[-1][1] + out.text)
                continue
            runs.append((type(out), out.text))
        else:
            runs.append(out)
    return runs


# --------------------------------------------------------------- over the SDK


def _request() -> Request:
    return Request(
        messages=[Message(participant="User", content="Tell me a story.")],
        config=ModelConfig(model="claude-test", max_tokens=2000),
    )


async def _through_membrane(
    policies: Sequence[StreamPolicy] | None,
) -> tuple[str, int, int, int]:
    words = "Once upon a time there was a quiet harbour town. " * 20
    reply = ScriptedReply.of(words, delta_chars=4)
    tokens = 0

    def on_output(output: ProviderOutput) -> None:
        nonlocal tokens
        tokens += isinstance(output, NativeDelta)

    with FakeAnthropic(reply) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        chunks = [
            item
            async for item in Membrane(provider).stream(
                _request(), on_output=on_output, policies=policies
            )
            if isinstance(item, Chunk)
        ]
        await provider.aclose()
    deltas = -(-len(words) // 4)
    return "".join(c.text for c in chunks), len(chunks), tokens, deltas


async def test_over_the_sdk_the_reply_comes_whole_in_fewer_pieces() -> None:
    text, chunks, tokens, deltas = await _through_membrane(None)
    assert text == "Once upon a time there was a quiet harbour town. " * 20
    assert tokens == deltas  # every delta seen, as on_output's caller counts tokens
    assert chunks < deltas  # the fake sends with no pause: deltas arrive together


async def test_with_a_policy_deltas_are_read_one_at_a_time() -> None:
    class LetAllPass:
        def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None:
            pass

    text, chunks, tokens, deltas = await _through_membrane([LetAllPass()])
    assert text.startswith("Once upon a time")
    assert chunks == tokens == deltas
