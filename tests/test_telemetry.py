"""OpenTelemetry traces of turns, read back from the SDK's in-memory exporter: a
trace per turn, a span per stage, one chat span per provider call with its
retries, stamps as events, figures as attributes, and no text or key anywhere.
Real parts: a recorded stream or the fake OpenAI server, espeak-ng, null sinks."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once
from websockets.asyncio.client import connect

from tests.serve_helpers import read_turn, running_server, send, start
from voice_membrane.cli.main import main
from voice_membrane.pipeline.build import build_parts
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.metrics import STAMPS
from voice_membrane.pipeline.session import Session
from voice_membrane.pipeline.turn import TurnResult
from voice_membrane.providers.replay import ReplaySource
from voice_membrane.server import Server
from voice_membrane.sinks.null import NullSink
from voice_membrane.telemetry.setup import TelemetryError, setup_tracing
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import ScriptedReply, thinking
from voice_membrane.tts.espeak import EspeakEngine

RECORDING = (
    Path(__file__).resolve().parent.parent / "audio_fixtures/streams/weather_tool_turn.jsonl"
)
STAGES = ("voice.reply", "voice.route", "voice.chunk", "voice.tts", "voice.sink")
USER_TEXT = "What is the weather like in Paris today?"
KEY = "sk-secret-telemetry-key"
NAMING = {"voice.llm", "voice.llm.source"}


def _set_provider(provider: TracerProvider | None) -> None:
    """Replace the process's tracer provider (the API sets it once: tests reset
    it, as OpenTelemetry's own test utilities do)."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    if provider is not None:
        trace.set_tracer_provider(provider)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _set_provider(provider)
    yield exporter
    _set_provider(None)  # the rest of the suite runs with no SDK
    provider.shutdown()


@pytest.fixture
def no_provider() -> Iterator[None]:
    _set_provider(None)
    yield
    _set_provider(None)


def replay_session() -> Session:
    return Session(ReplaySource(RECORDING, speed=0), EspeakEngine(), NullSink())


async def one_turn(session: Session, text: str = USER_TEXT) -> TurnResult:
    async with session:
        return await session.turn(text)


def by_name(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def assert_no_text(spans: Sequence[ReadableSpan], result: TurnResult, *secrets: str) -> None:
    """No attribute (of a span or an event) holds the user's or the model's words,
    or a secret."""
    words = {w.strip(".,!?;:") for w in (USER_TEXT + " " + result.visible_text).split()}
    for block in result.blocks:
        words |= set((block.content or "").split())
    words = {w for w in words if len(w) > 3}
    assert words
    values: list[str] = []
    for span in spans:
        attributes = [span.attributes or {}] + [event.attributes or {} for event in span.events]
        for group in attributes:
            # These name the configured source (here a recording's file name, whose
            # words the reply shares), not anything said.
            values += [str(v) for k, v in group.items() if k not in NAMING]
    assert len(values) > 50
    for value in values:
        for word in words:
            assert word not in value, (word, value)
        for secret in secrets:
            assert secret not in value


@pytest.mark.anyio
async def test_a_turn_is_one_trace_with_a_span_per_stage(
    exporter: InMemorySpanExporter,
) -> None:
    result = await one_turn(replay_session())
    assert result.error is None and result.spoken_text
    spans = exporter.get_finished_spans()

    (turn,) = by_name(spans, "voice.turn")
    assert turn.parent is None
    assert {span.context.trace_id for span in spans} == {turn.context.trace_id}
    turn_id = turn.context.span_id
    stages = {name: by_name(spans, name) for name in STAGES}
    assert all(len(found) == 1 for found in stages.values()), stages
    assert all(parent_of(found[0]) == turn_id for found in stages.values())
    # The LLM call under the reply stage, with the GenAI conventions' names.
    (chat,) = [span for span in spans if span.name.startswith("chat ")]
    assert parent_of(chat) == stages["voice.reply"][0].context.span_id
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "replay"
    assert chat.attributes["gen_ai.request.max_tokens"] > 0  # type: ignore[operator]
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    # A span per TTS request, under the TTS stage, each with its piece's figures.
    requests = by_name(spans, "voice.tts.request")
    assert len(requests) == len(result.report.tts_pieces) > 1
    tts_id = stages["voice.tts"][0].context.span_id
    for request, piece in zip(requests, result.report.tts_pieces, strict=True):
        assert parent_of(request) == tts_id and request.attributes is not None
        assert request.attributes["voice.piece.chars"] == piece["chars"]
        assert request.attributes["voice.tts.first_byte_ms"] == piece["first_byte_ms"]
        assert [event.name for event in request.events] == ["first_byte"]

    # The stamps as events, in order; the report's figures as attributes.
    reached = [name for name in STAMPS if result.report.stamps_ms[name] is not None]
    assert [event.name for event in turn.events] == reached == list(STAMPS)
    times = [event.timestamp for event in turn.events]
    assert times == sorted(times) and turn.start_time is not None and turn.end_time is not None
    assert turn.start_time <= times[0] and times[-1] <= turn.end_time
    attributes = turn.attributes
    assert attributes is not None
    report = result.report
    assert attributes["voice.first_audio_ms"] == report.first_audio_ms
    assert attributes["voice.pipeline_added_ms"] == report.pipeline_added_ms
    assert attributes["voice.tts.first_byte_ms_median"] == report.tts_first_byte_ms_median
    assert attributes["voice.stamp.first_token_ms"] == report.stamps_ms["first_token"]
    assert attributes["voice.chunks"] == report.chunks
    assert attributes["voice.stage.tts.busy_ms"] == report.stages["tts"]["busy_ms"]
    assert attributes["voice.llm.retries"] == 0
    assert attributes["voice.tts"] == "espeak"
    assert_no_text(spans, result)


@pytest.mark.anyio
async def test_an_interrupted_turn_ends_every_span_and_says_so(
    exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    session = Session(
        ReplaySource(RECORDING, speed=0), EspeakEngine(), NullSink(sample_rate=22050, realtime=True)
    )
    results: list[TurnResult] = []
    async with session:

        async def speak() -> None:
            results.append(await session.turn(USER_TEXT))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(speak)
                while (
                    session.current is None or "first_audio" not in session.current.metrics.stamps
                ):
                    await anyio.sleep(0.01)
                assert session.interrupt()
    (result,) = results
    assert result.interrupted
    spans = exporter.get_finished_spans()
    (turn,) = by_name(spans, "voice.turn")
    assert turn.attributes is not None and turn.attributes["voice.interrupted"] is True
    assert "first_audio" in [event.name for event in turn.events]
    # Every span started was ended (an unended one is never exported), cancelled stages say so.
    assert all(len(by_name(spans, name)) == 1 for name in STAGES)
    assert any(span.attributes and span.attributes.get("voice.cancelled") for span in spans)
    assert by_name(spans, "voice.tts.request")
    assert {span.context.trace_id for span in spans} == {turn.context.trace_id}
    assert "detach" not in caplog.text  # the context was restored in the task that set it
    assert_no_text(spans, result)


def cloud_pipeline(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "cloud.toml"
    path.write_text(
        f"""[llm]
spec = "openai:gpt-test"
base_url = "{base_url}"
api_key_env = "TELEMETRY_TEST_KEY"
max_tokens = 300
temperature = 0.5
[tts]
spec = "espeak"
[sink]
kind = "null"
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.anyio
async def test_a_retried_call_is_one_span_with_its_retry(
    exporter: InMemorySpanExporter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEMETRY_TEST_KEY", KEY)
    busy = ScriptedReply.http_error(429, retry_after=0.05, message="slow down")
    answer = ScriptedReply.of(thinking("The user greets me."), "Hello there, Ada.")
    with FakeOpenAI(busy, answer) as server:
        parts = build_parts(load_pipeline(cloud_pipeline(tmp_path, server.base_url)))
        session = Session(parts.membrane, parts.engine, parts.sink, model=parts.model)
        result = await one_turn(session)
    assert result.error is None and len(result.report.retries) == 1
    spans = exporter.get_finished_spans()

    (chat,) = [span for span in spans if span.name.startswith("chat ")]
    assert chat.name == "chat gpt-test" and chat.attributes is not None
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.request.model"] == "gpt-test"
    assert chat.attributes["gen_ai.request.max_tokens"] == 300
    assert chat.attributes["gen_ai.request.temperature"] == 0.5
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0  # type: ignore[operator]
    assert chat.attributes["gen_ai.usage.output_tokens"] > 0  # type: ignore[operator]
    (retry,) = chat.events
    assert retry.name == "gen_ai.retry" and retry.attributes is not None
    assert retry.attributes["attempt"] == 1 and retry.attributes["delay_s"] > 0  # type: ignore[operator]
    assert retry.attributes["error.type"] == "rate_limit"
    assert retry.attributes["http.response.status_code"] == 429
    (turn,) = by_name(spans, "voice.turn")
    assert turn.attributes is not None and turn.attributes["voice.llm.retries"] == 1
    assert turn.attributes["gen_ai.usage.output_tokens"] > 0  # type: ignore[operator]
    assert_no_text(spans, result, KEY, "slow down")


@pytest.mark.anyio
async def test_concurrent_sessions_give_separate_traces(exporter: InMemorySpanExporter) -> None:
    results: list[TurnResult] = []

    async def session_turn() -> None:
        results.append(await one_turn(replay_session()))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(session_turn)
            tg.start_soon(session_turn)
    assert all(result.error is None for result in results)
    spans = exporter.get_finished_spans()
    turns = by_name(spans, "voice.turn")
    assert len(turns) == 2 and all(turn.parent is None for turn in turns)
    assert turns[0].context.trace_id != turns[1].context.trace_id
    by_id = {span.context.span_id: span for span in spans}
    names: list[list[str]] = []
    for turn in turns:
        trace_id = turn.context.trace_id
        in_trace = [span for span in spans if span.context.trace_id == trace_id]
        for span in in_trace:  # every span's parents are in its own trace, up to its turn
            while span.parent is not None:
                span = by_id[span.parent.span_id]
                assert span.context.trace_id == trace_id
            assert span is turn
        names.append(sorted(span.name for span in in_trace))
    assert names[0] == names[1] and len(names[0]) + len(names[1]) == len(spans)


@pytest.mark.anyio
async def test_served_sessions_at_once_give_a_trace_per_turn_named_by_session(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    ids: list[str] = []

    async def client(server: Server) -> None:
        async with connect(server.ws_url) as ws:
            ids.append((await start(ws, pipeline="short"))["session"])
            for _ in range(2):
                await send(ws, type="user.message", text=USER_TEXT)
                assert (await read_turn(ws)).end["error"] is None

    async with running_server(tmp_path) as server, anyio.create_task_group() as tg:
        tg.start_soon(client, server)
        tg.start_soon(client, server)
    spans = exporter.get_finished_spans()
    turns = by_name(spans, "voice.turn")
    assert len({turn.context.trace_id for turn in turns}) == len(turns) == 4
    assert all(turn.parent is None for turn in turns)
    seen = sorted(
        (str(t.attributes["gen_ai.conversation.id"]), int(t.attributes["voice.turn.index"]))  # type: ignore[index, arg-type]
        for t in turns
    )
    assert seen == sorted((session_id, i) for session_id in ids for i in range(2))
    by_id = {span.context.span_id: span for span in spans}
    for span in spans:  # every span leads up to a turn of its own trace
        root = span
        while root.parent is not None:
            root = by_id[root.parent.span_id]
            assert root.context.trace_id == span.context.trace_id
        assert root.name == "voice.turn"


@pytest.mark.anyio
async def test_with_no_sdk_a_turn_runs_and_nothing_is_recorded(no_provider: None) -> None:
    result = await one_turn(replay_session())
    assert result.error is None and result.spoken_text
    assert result.report.first_audio_ms is not None
    assert not trace.get_current_span().is_recording()


@pytest.mark.anyio
async def test_setup_tracing_exports_on_shutdown_with_the_service_name(
    no_provider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    exporter = InMemorySpanExporter()
    shutdown = setup_tracing(exporter)
    await one_turn(replay_session())
    shutdown()  # flushes the batch
    spans = exporter.get_finished_spans()
    assert len(by_name(spans, "voice.turn")) == 1
    assert spans[0].resource.attributes["service.name"] == "voice-membrane"


def test_setup_tracing_without_the_sdk_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(TelemetryError, match=r"pip install 'voice-membrane\[otel\]'"):
        setup_tracing()


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector on loopback: keeps the span names it receives."""

    names: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest.FromString(body)
        assert self.path == "/v1/traces"
        for resource in request.resource_spans:
            service = [
                a.value.string_value
                for a in resource.resource.attributes
                if a.key == "service.name"
            ]
            for scope in resource.scope_spans:
                self.names += [f"{service[0]}/{span.name}" for span in scope.spans]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def collect_spans(monkeypatch: pytest.MonkeyPatch, service: str, argv: list[str]) -> None:
    """Run the CLI with ``argv`` against a loopback OTLP collector (``_Collector``
    keeps the span names it was sent, as "service/span")."""
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    _Collector.names = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.setenv("OTEL_SERVICE_NAME", service)
        main(argv)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def replay_pipeline(tmp_path: Path) -> Path:
    """The recorded turn, as fast as it replays, spoken by espeak-ng into nothing."""
    path = tmp_path / "replay.toml"
    path.write_text(
        f'[llm]\nspec = "replay:{RECORDING}"\nreplay_speed = 0\n'
        '[tts]\nspec = "espeak"\n[sink]\nkind = "null"\n',
        encoding="utf-8",
    )
    return path


def test_run_otel_sends_the_turn_to_the_collector_named_by_otel_variables(
    no_provider: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = replay_pipeline(tmp_path)
    collect_spans(
        monkeypatch,
        "my-voice",
        ["run", "--pipeline", str(pipeline), "--prompt", USER_TEXT, "--otel"],
    )
    assert "my-voice/voice.turn" in _Collector.names
    assert "my-voice/voice.tts.request" in _Collector.names


def test_run_otel_without_the_extra_is_one_line(
    no_provider: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    pipeline = replay_pipeline(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--pipeline", str(pipeline), "--prompt", "hi", "--otel"])
    message = str(exit_.value.code)
    assert message.startswith("voice-membrane run: tracing needs the otel extra")
    assert "\n" not in message


def test_bench_otel_sends_each_measured_turn_to_the_collector(
    no_provider: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = replay_pipeline(tmp_path)
    args = ["bench", "--pipeline", str(pipeline), "--turns", "2", "--warmup", "0", "--otel"]
    collect_spans(monkeypatch, "bench-voice", args)
    assert _Collector.names.count("bench-voice/voice.turn") == 2
