"""The stall deadline: a stream that stops after its first tokens ends the reply
with a typed "stalled" error once it has sent nothing new for ``stall_timeout_s``
— whatever the vendor, through the real SDKs, the embedded model and recordings —
instead of holding the turn silent for the HTTP timeout; what came before is
kept and spoken, the report says it stalled, ``run`` prints one line and a
``serve`` client gets an ``llm_error`` of kind ``stalled``."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from vendors import VENDORS, Vendor

from tests.serve_helpers import next_event, read_turn, send, session
from voice_membrane.cli.run import run_assistant
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.membrane.reply import MembraneItem, ReplyError, ReplyResult
from voice_membrane.membrane.tools import ToolCall
from voice_membrane.pipeline.build import build_parts
from voice_membrane.pipeline.config import ConfigError, PipelineConfig, load_pipeline
from voice_membrane.pipeline.session import Session
from voice_membrane.providers.local_llama import LoadedModel, LocalLlama, ModelThread
from voice_membrane.providers.replay import ReplaySource
from voice_membrane.providers.text_source import TextSourceProvider
from voice_membrane.server import Server
from voice_membrane.sinks.null import NullSink
from voice_membrane.testing.script import Pause, ScriptedReply, stall, text, thinking, tool_use
from voice_membrane.testing.silent_engine import SilentEngine
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vendors.retry import StallDeadline
from voice_membrane.vocab.events import Chunk
from voice_membrane.vocab.messages import Message, ModelConfig, Request
from voice_membrane.vocab.provider_output import (
    NativeDelta,
    NativeStart,
    ProviderOutput,
    StopInfo,
    TextDelta,
    Usage,
)

pytestmark = pytest.mark.anyio
# Every test is bounded: without the deadline a stalled stream holds the turn for
# the SDK's read timeout (60 s by default), or for ever when keep-alives come.
GUARD_S = 20
STALL_S = 0.5
BEFORE = "Hello there, my friend"  # what the stream sends before it stops
REPLY = BEFORE + " and then all the rest of it."


def request(model: str = "m") -> Request:
    return Request(
        messages=[Message(participant="User", content="Hello?")],
        config=ModelConfig(model=model, max_tokens=100),
    )


async def collect(membrane: Membrane, model: str = "m") -> list[MembraneItem]:
    with anyio.fail_after(GUARD_S):
        return [item async for item in membrane.stream(request(model))]


def stalled_reply(*, keepalive_s: float | None = None) -> ScriptedReply:
    """``BEFORE`` in two deltas, then nothing (the connection open)."""
    return ScriptedReply.of(REPLY, delta_chars=11, pauses=(stall(2, keepalive_s=keepalive_s),))


def visible(items: list[MembraneItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, Chunk) and i.meta.visible)


def the_error(items: list[MembraneItem]) -> ReplyError:
    (error,) = [i for i in items if isinstance(i, ReplyError)]
    return error


# ------------------------------------------------------------------ every vendor


@pytest.mark.parametrize("keepalive_s", [None, 0.1], ids=["silent", "keep-alives"])
@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_a_stream_that_stops_ends_the_reply_as_stalled(
    vendor: Vendor, keepalive_s: float | None
) -> None:
    # Keep-alives (Anthropic's ping, an empty OpenAI chunk, an empty Gemini part)
    # reset an HTTP read timeout for ever; they are no progress here.
    with vendor.server(stalled_reply(keepalive_s=keepalive_s)) as server:
        provider = vendor.provider(server)
        membrane = Membrane(provider, stall_timeout_s=STALL_S)
        items = await collect(membrane, vendor.model)
        await provider.aclose()
        with anyio.fail_after(5):  # the stalled stream was closed, not left open
            while server.cancelled_streams == 0:
                await anyio.sleep(0.02)
    assert visible(items) == BEFORE  # kept: its block completed, nothing lost
    error = the_error(items)
    assert error.kind == "stalled" and error.after_output and error.provider == vendor.name
    assert error.message == (
        f"{vendor.name}: stalled: the stream stopped: nothing new for {STALL_S:g} s after "
        "2 deltas (what came before is kept)"
    )
    result = items[-1]
    assert isinstance(result, ReplyResult) and result.stop_reason == "error"
    assert result.text == BEFORE and result.error == error.message


@pytest.mark.parametrize("vendor", VENDORS[::2], ids=lambda v: v.name)  # with thinking
async def test_a_stall_inside_thinking_ends_the_reply_the_same(vendor: Vendor) -> None:
    reply = ScriptedReply.of(
        thinking("The user says hello; let me think hard."),
        text("Hi."),
        delta_chars=8,
        pauses=(stall(2),),
    )
    with vendor.server(reply) as server:
        provider = vendor.provider(server)
        items = await collect(Membrane(provider, stall_timeout_s=STALL_S), vendor.model)
        await provider.aclose()
    assert the_error(items).kind == "stalled" and visible(items) == ""
    result = items[-1]
    assert isinstance(result, ReplyResult)
    assert [b.type for b in result.blocks] == ["thinking"]  # kept, hidden


async def test_each_call_of_the_tool_loop_has_its_own_deadline() -> None:
    # The reply's second call (after a tool round) stalls: the first call's text
    # and the tool round stand.
    asked: list[ToolCall] = []

    async def weather(calls: list[ToolCall]) -> list[str]:
        asked.extend(calls)
        return ["Sunny, 21 degrees."]

    vendor = VENDORS[0]
    first = ScriptedReply.of(text("Let me check. "), tool_use("get_weather", {"city": "Paris"}))
    with vendor.server(first, stalled_reply()) as server:
        provider = vendor.provider(server)
        membrane = Membrane(provider, stall_timeout_s=STALL_S)
        with anyio.fail_after(GUARD_S):
            items = [i async for i in membrane.stream(request(vendor.model), on_tool_calls=weather)]
        await provider.aclose()
    assert [call.name for call in asked] == ["get_weather"]
    assert visible(items) == "Let me check. " + BEFORE
    assert the_error(items).kind == "stalled"


@pytest.mark.parametrize("vendor", VENDORS[::2], ids=lambda v: v.name)  # with thinking
async def test_each_delta_restarts_the_count_thinking_included(vendor: Vendor) -> None:
    # A slow reply is not a stalled one: every delta, a thinking delta too, is
    # progress, so a reply streaming far longer than the deadline ends well.
    slow = ScriptedReply.of(
        thinking("The user says hello; answer kindly."),
        text("Hi there, nice to meet you."),
        delta_chars=6,
        delta_delay_s=STALL_S * 0.4,
    )
    with vendor.server(slow) as server:
        provider = vendor.provider(server)
        items = await collect(Membrane(provider, stall_timeout_s=STALL_S), vendor.model)
        await provider.aclose()
    assert not [i for i in items if isinstance(i, ReplyError)]
    assert visible(items) == "Hi there, nice to meet you."


async def test_a_pause_shorter_than_the_deadline_is_no_stall() -> None:
    vendor = VENDORS[1]
    paused = ScriptedReply.of(REPLY, delta_chars=11, pauses=(Pause(2, STALL_S * 0.6),))
    with vendor.server(paused) as server:
        provider = vendor.provider(server)
        items = await collect(Membrane(provider, stall_timeout_s=STALL_S), vendor.model)
        await provider.aclose()
    assert not [i for i in items if isinstance(i, ReplyError)] and visible(items) == REPLY


# ------------------------------------------------------------------ what counts


class ScriptedProvider:
    """A provider whose stream is a list of outputs and waits, for the rules that
    no vendor fake can reach (a stop then silence, usage counts as keep-alives)."""

    name = "scripted"

    def __init__(self, *steps: ProviderOutput | float) -> None:
        self.steps = steps
        self.closed = False

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def stream(
        self, built: Any, config: Any, *, streaming: bool = True
    ) -> AsyncGenerator[ProviderOutput, None]:
        try:
            for step in self.steps:
                if isinstance(step, float):
                    await anyio.sleep(step)
                else:
                    yield step
        finally:
            self.closed = True


FOREVER = 3600.0


async def test_usage_counts_are_no_progress() -> None:
    ticks: list[ProviderOutput | float] = [0.05, Usage(output_tokens=1)] * 200
    provider = ScriptedProvider(NativeStart("text"), NativeDelta("Hi there"), *ticks)
    items = await collect(Membrane(provider, stall_timeout_s=STALL_S))
    assert the_error(items).kind == "stalled" and visible(items) == "Hi there"
    assert provider.closed


async def test_empty_deltas_do_not_begin_a_call_nor_keep_it_alive() -> None:
    # Before any real output the first-token deadline still runs; after it, the
    # stall deadline: empty deltas are no progress for either.
    ticks: list[ProviderOutput | float] = [0.05, TextDelta("")] * 200
    before = await collect(
        Membrane(ScriptedProvider(*ticks), first_token_deadline_s=STALL_S, stall_timeout_s=60)
    )
    assert the_error(before).kind == "timeout"
    after = await collect(Membrane(ScriptedProvider(TextDelta("Hi"), *ticks), stall_timeout_s=0.3))
    assert the_error(after).kind == "stalled"


async def test_a_stream_silent_after_its_stop_ends_as_it_was() -> None:
    # The stop came: the reply was whole, only the stream's close is late.
    provider = ScriptedProvider(TextDelta("All done."), StopInfo("end_turn"), FOREVER)
    items = await collect(Membrane(provider, stall_timeout_s=STALL_S))
    assert not [i for i in items if isinstance(i, ReplyError)]
    result = items[-1]
    assert isinstance(result, ReplyResult) and result.stop_reason == "end_turn"


async def test_the_wait_for_the_first_output_is_not_a_stall() -> None:
    # The embedded model has no first-token deadline (it computes a long prompt);
    # the stall deadline starts only once the call has begun.
    provider = ScriptedProvider(STALL_S * 2.5, TextDelta("Hi."), StopInfo("end_turn"))
    items = await collect(Membrane(provider, first_token_deadline_s=None, stall_timeout_s=STALL_S))
    assert not [i for i in items if isinstance(i, ReplyError)] and visible(items) == "Hi."


async def test_time_the_consumer_takes_is_not_the_streams() -> None:
    # A consumer that holds the stream (first-audio priority, a slow sink) between
    # outputs never makes it look stalled: only the wait on the stream counts.
    provider = ScriptedProvider(
        TextDelta("One, "), 0.01, Usage(output_tokens=1), 0.01, TextDelta("two."), 0.01,
        StopInfo("end_turn"),
    )  # fmt: skip
    membrane = Membrane(provider, stall_timeout_s=STALL_S)
    items: list[MembraneItem] = []
    with anyio.fail_after(GUARD_S):
        async for item in membrane.stream(request()):
            items.append(item)
            await anyio.sleep(STALL_S * 0.8)  # after every item, usage included
    assert not [i for i in items if isinstance(i, ReplyError)] and visible(items) == "One, two."


def test_the_stall_arithmetic_and_message() -> None:
    stall_ = StallDeadline(5.0)
    assert stall_.note(NativeStart("text")) and stall_.progress == 1
    assert not stall_.note(Usage(output_tokens=1)) and not stall_.note(NativeDelta(""))
    stall_.waited_s += 2.0  # (the caller adds a wait that brought no progress)
    assert stall_.budget() == 3.0
    assert stall_.note(NativeDelta("Hi"))  # progress: the count starts again
    assert stall_.budget() == 5.0 and stall_.deltas == 1
    error = stall_.error("openai")
    assert isinstance(error, ProviderError) and error.kind == "stalled"
    assert not error.retryable  # it comes after output: a retry would repeat it
    assert str(error) == (
        "openai: stalled: the stream stopped: nothing new for 5 s after 1 delta "
        "(what came before is kept)"
    )


# ------------------------------------------------------------------ the embedded sources


def recording(tmp_path: Path, gap_ms: int = 60_000) -> Path:
    """``BEFORE`` at once, the rest a minute later (the recorded stream stopped)."""
    path = tmp_path / "stalls.jsonl"
    lines: list[dict[str, Any]] = [
        {"format": "voice-membrane-replay", "version": 1, "mode": "prefill"},
        {"t_ms": 0, "text": BEFORE[:11]},
        {"t_ms": 10, "text": BEFORE[11:]},
        {"t_ms": gap_ms, "text": REPLY[len(BEFORE) :]},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def quick_session(membrane: Membrane) -> Session:
    # The idle flush comes before the stall, as on defaults (1 s before 5 s).
    return Session(membrane, SilentEngine(), NullSink(), chunker_options={"idle_flush_s": 0.1})


async def test_a_recording_that_stops_is_heard_to_its_last_word(tmp_path: Path) -> None:
    source = TextSourceProvider(ReplaySource(recording(tmp_path)))
    membrane = Membrane(source, first_token_deadline_s=None, stall_timeout_s=STALL_S)
    async with quick_session(membrane) as voice:
        with anyio.fail_after(GUARD_S):
            result = await voice.turn("Hi!")
    assert result.visible_text == BEFORE and result.spoken_text == BEFORE
    assert result.error is not None and "replay:stalls.jsonl: stalled: " in result.error
    assert result.report.llm_error == "stalled"
    assert "stop error (stalled)" in result.report.table()
    assert result.report.to_dict()["llm_error"] == "stalled"


async def test_the_stall_speaks_what_was_held_with_no_timed_flush(tmp_path: Path) -> None:
    # Without a timed flush (or with one longer than the stall) the stall itself
    # lets go of what the chunker held, last word included: a stall cuts no word.
    source = TextSourceProvider(ReplaySource(recording(tmp_path)))
    membrane = Membrane(source, first_token_deadline_s=None, stall_timeout_s=STALL_S)
    voice = Session(membrane, SilentEngine(), NullSink(), chunker_options={"idle_flush_s": None})
    async with voice:
        with anyio.fail_after(GUARD_S):
            result = await voice.turn("Hi!")
    assert result.spoken_text == BEFORE and result.report.llm_error == "stalled"


class StuckLlama:
    """llama.cpp as ``LoadedModel`` calls it: two deltas, then a token that takes
    far longer than the deadline (a starved CPU), then the rest."""

    chat_format = None

    def __init__(self, stuck_s: float) -> None:
        self.stuck_s = stuck_s
        self.closed = threading.Event()
        self.metadata: dict[str, str] = {}

    def tokenize(self, text: bytes, add_bos: bool = False) -> list[int]:
        return list(range(len(text.split())))  # (the session fits the history)

    def create_chat_completion(self, **options: Any) -> Iterator[dict[str, Any]]:
        try:
            for piece in (BEFORE[:11], BEFORE[11:]):
                yield {"choices": [{"delta": {"content": piece}}]}
            threading.Event().wait(self.stuck_s)  # blocking, on the model's thread
            yield {"choices": [{"delta": {"content": REPLY[len(BEFORE) :]}}]}
        finally:
            self.closed.set()


async def test_the_embedded_model_stalling_mid_reply_ends_the_turn() -> None:
    llama = StuckLlama(stuck_s=1.5)
    source = LocalLlama(max_tokens=16)
    loaded = LoadedModel(llama, "stuck.gguf", 2048, 1, ModelThread("stuck"))  # type: ignore[arg-type]
    source._model = loaded
    membrane = Membrane(TextSourceProvider(source), first_token_deadline_s=None)
    membrane.stall_timeout_s = STALL_S
    async with quick_session(membrane) as voice:
        with anyio.fail_after(GUARD_S):
            result = await voice.turn("Hi!")
    assert result.report.llm_error == "stalled" and result.spoken_text == BEFORE
    # The token in progress finished on its thread, then generation was closed
    # there and the model let go: the next turn can have it.
    assert llama.closed.is_set() and not loaded.lock.locked()


# ------------------------------------------------------------------ the faces


def pipeline(tmp_path: Path, llm: str) -> Path:
    path = tmp_path / "stalls.toml"
    path.write_text(
        f"{llm}\nstall_timeout_s = {STALL_S}\n\n[chunker]\nidle_flush_s = 0.1\n\n"
        '[tts]\nspec = "espeak"\n\n[sink]\nkind = "null"\n',
        encoding="utf-8",
    )
    return path


def cloud(tmp_path: Path, vendor: Vendor, base_url: str) -> Path:
    llm = f'[llm]\nspec = "{vendor.name}:{vendor.model}"\nbase_url = "{base_url}"'
    return pipeline(tmp_path, llm + '\napi_key_env = "MY_KEY"')


@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_a_session_hears_what_came_before_and_reports_the_stall(
    vendor: Vendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "fake-key")
    with vendor.server(stalled_reply()) as server:
        parts = build_parts(load_pipeline(cloud(tmp_path, vendor, server.base_url)))
        assert parts.membrane.stall_timeout_s == STALL_S
        async with quick_session(parts.membrane) as voice:
            with anyio.fail_after(GUARD_S):
                result = await voice.turn("Hi!")
    assert result.spoken_text == BEFORE == result.visible_text
    assert result.report.llm_error == "stalled" and result.error is not None
    assert f"{vendor.name}: stalled: " in result.error


async def test_run_prints_the_stall_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "fake-key")
    vendor = VENDORS[0]
    printed: list[str] = []
    with vendor.server(stalled_reply()) as server:
        config = load_pipeline(cloud(tmp_path, vendor, server.base_url))
        with anyio.fail_after(GUARD_S):
            await run_assistant(config, prompt="Hi!", out=printed.append)
    lines = "".join(printed).splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == [
        f"error: anthropic: stalled: the stream stopped: nothing new for {STALL_S:g} s "
        "after 2 deltas (what came before is kept)"
    ]
    assert "".join(printed).index(BEFORE) < "".join(printed).index(errors[0])


async def test_a_serve_client_is_told_the_reply_stalled(tmp_path: Path) -> None:
    replay = f'[llm]\nspec = "replay:{recording(tmp_path)}"'
    paths = [pipeline(tmp_path, replay)]
    async with (
        Server(paths, port=0, log=lambda *a, **k: None) as server,
        session(server) as ws,
    ):
        await send(ws, type="user.message", text="Hi!")
        turn = await read_turn(ws)
        error = await next_event(ws)
    end = turn.end
    assert end["heard"] == BEFORE == end["visible"] and "stalled" in end["error"]
    assert turn.of("metrics")[0]["report"]["llm_error"] == "stalled"
    assert error["type"] == "error" and error["code"] == "llm_error"
    assert error["kind"] == "stalled" and error["turn"] == 1
    assert error["message"].startswith("replay:stalls.jsonl: stalled: the stream stopped")


# ------------------------------------------------------------------ settings


def test_the_deadline_each_pipeline_gets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "k")
    vendor = VENDORS[1]
    # The embedded model computes here: a busy machine slows it without stalling it.
    assert build_parts(PipelineConfig()).membrane.stall_timeout_s == 60
    set_ = load_pipeline(cloud(tmp_path, vendor, "http://127.0.0.1:9/v1"))
    assert build_parts(set_).membrane.stall_timeout_s == STALL_S
    llm = {"spec": "openai:gpt-test", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "MY_KEY"}
    assert build_parts(PipelineConfig().with_overrides({"llm": llm})).membrane.stall_timeout_s == 5
    # Thinking and a model's own images pause between deltas: a longer default.
    thinking_ = PipelineConfig().with_overrides({"llm": {"thinking_budget": 2048}})
    assert build_parts(thinking_).membrane.stall_timeout_s == 60
    images = PipelineConfig().with_overrides({"images": {"model_output": True}})
    assert build_parts(images).membrane.stall_timeout_s == 60


def test_a_stall_timeout_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="stall_timeout_s must be positive"):
        Membrane(ScriptedProvider(), stall_timeout_s=0)  # type: ignore[arg-type]
    path = tmp_path / "p.toml"
    path.write_text("[llm]\nstall_timeout_s = -1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"llm\.stall_timeout_s: Input should be greater"):
        load_pipeline(path)
