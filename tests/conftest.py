"""Fixtures shared by the test modules.

``server`` / ``fake``: a module that sets ``FAKE`` (a fake server class from
``voice_membrane.testing``) gets one server for the module, reset before each test.
``pulse``: a private PulseAudio server with a null sink, one per module (skipped
where pulseaudio is not installed).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from voice_membrane.infra.redact import KEY_VARIABLES, forget_all
from voice_membrane.testing.fake_server import FakeServer
from voice_membrane.testing.pulse import PulseServer, PulseUnavailable, pulse_null_sink

# The tests press Ctrl-C in the commands they start (SIGINT), as a user at a
# terminal does. A test run started in the background of a non-interactive
# shell (`make test &`) inherits SIGINT ignored, and so would every command it
# starts: Python then never turns Ctrl-C into KeyboardInterrupt, and such a
# test waits out its timeout. Its children get the default back from here.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The suite's longest files, longest first (pytest --durations=0, summed per
# file; most of it is real time: conversations, browsers, served processes).
# pytest-xdist hands a worker its next file when it frees up; handed out first,
# these leave short files for the end and the workers finish together (handed
# out last, as when xdist orders files by their number of tests, the longest
# ran alone at the end: ~30 s of the run). `make test` passes
# --no-loadscope-reorder so that this order is the one used.
LONGEST_FIRST = (
    "test_voice_loop.py",
    "test_bench_voice_serve.py",
    "test_kv_trim.py",
    "test_stt_whisper.py",
    "test_bad_input_default_stt.py",
    "test_models_pull.py",
    "test_browser_mic.py",
    "test_bench_twilio_cli.py",
    "test_serve_voice.py",
    "test_benchmarks.py",
    "test_bench_serve_load.py",
    "test_serve_phone_carriers.py",
    "test_serve_workers.py",
    "test_browser_page_app.py",
    "test_stt_phone.py",
    "test_voice_wire_cloud.py",
    "test_vad.py",
    "test_hostile_stt_outage.py",
    "test_serve_drain.py",
    "test_serve_cluster.py",
    "test_stall_deadline.py",
    "test_run_cloud_e2e.py",
    "test_serve_twilio.py",
    "test_serve_audio_pace.py",
    "test_serve_slow_reader.py",
    "test_serve_turns.py",
    "test_run_e2e.py",
    "test_microphone.py",
    "test_greeting.py",
    "test_recording.py",
    "test_webrtc_example.py",
    "test_browser_webrtc.py",
    "test_webrtc_loss.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gone = [name for name in LONGEST_FIRST if not (Path(__file__).parent / name).exists()]
    if gone:  # a renamed file would silently go back to the end
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FIRST names no file: {gone}")
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # A stable sort: the files not named keep their collected order.
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(autouse=True)
def no_remembered_keys() -> None:
    """Each test starts with no key remembered by another: the secret filter holds
    back text that may begin a known key, which moves where a reply's chunks are cut."""
    forget_all()


@pytest.fixture
def no_key_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """No vendor key variable set: what a test masks by value is only what it remembers."""
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    fake: FakeServer = request.module.FAKE()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def fake(server: FakeServer) -> FakeServer:
    server.reset()
    return server


@pytest.fixture(scope="module")
def pulse() -> Iterator[PulseServer]:
    try:
        with pulse_null_sink() as server:
            yield server
    except PulseUnavailable as exc:
        pytest.skip(str(exc))
