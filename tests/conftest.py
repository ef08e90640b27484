"""Fixtures shared by the test modules.

``server`` / ``fake``: a module that sets ``FAKE`` (a fake server class from
``voice_membrane.testing``) gets one server for the module, reset before each test.
``pulse``: a private PulseAudio server with a null sink, one per module (skipped
where pulseaudio is not installed).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from voice_membrane.infra.redact import KEY_VARIABLES, forget_all
from voice_membrane.testing.fake_server import FakeServer
from voice_membrane.testing.pulse import PulseServer, PulseUnavailable, pulse_null_sink


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
