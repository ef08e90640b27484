"""serve says nothing to a socket that has not authenticated: whatever it sends
(or does not), it gets no frame, text or binary, only the close (code and reason)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.serve_helpers import GUARD_S, running_server
from voice_membrane.server import Server

TOKEN = "a-token-of-24-characters"
START_TIMEOUT_S = 0.4

# What a client that has not authenticated may send first: anything but a
# session.start with the right token.
PRE_AUTH: list[str | bytes] = [
    json.dumps({"type": "session.start"}),
    json.dumps({"type": "session.start", "token": "wrong"}),
    json.dumps({"type": "session.start", "token": TOKEN[:-1]}),
    json.dumps({"type": "session.start", "pipeline": "nope"}),
    json.dumps({"type": "session.start", "token": TOKEN, "audio": {"sample_rate": 1}}),
    json.dumps({"type": "user.message", "text": "hi"}),
    json.dumps({"type": "interrupt"}),
    json.dumps({"type": "session.end"}),
    json.dumps({"type": "nope"}),
    "{not json",
    "[]",
    "",
    b"\x00\x01binary",
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BlockingPortal, Server]]:
    folder = tmp_path_factory.mktemp("preauth")
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            running_server(folder, token=TOKEN, start_timeout_s=START_TIMEOUT_S)
        ) as server,
    ):
        yield portal, server


def until_closed(ws: ClientConnection) -> list[Any]:
    """Every frame received before the close."""
    received: list[Any] = []
    try:
        while True:
            received.append(ws.recv(timeout=GUARD_S))
    except ConnectionClosed:
        return received


def open_socket(server: Server, **options: Any) -> ClientConnection:
    return connect(server.ws_url, open_timeout=GUARD_S, close_timeout=1, **options)


def test_an_idle_socket_is_closed_with_nothing_said(served: tuple[BlockingPortal, Server]) -> None:
    _, server = served
    with open_socket(server) as ws:
        assert until_closed(ws) == []
    assert ws.close_code == 4408 and ws.close_reason == "idle_timeout"


@pytest.mark.parametrize("first", PRE_AUTH)
def test_a_first_message_without_the_token_gets_the_close_only(
    served: tuple[BlockingPortal, Server], first: str | bytes
) -> None:
    _, server = served
    with open_socket(server) as ws:
        ws.send(first)
        assert until_closed(ws) == []
    assert ws.close_code == 4401


def test_a_flood_or_an_oversized_frame_gets_the_close_only(
    served: tuple[BlockingPortal, Server],
) -> None:
    _, server = served
    with open_socket(server) as ws:
        for _ in range(100):
            try:
                ws.send(json.dumps({"type": "interrupt"}))
            except ConnectionClosed:
                break
        assert until_closed(ws) == []
    assert ws.close_code in (4401, 1008)
    with open_socket(server) as ws:
        with contextlib.suppress(ConnectionClosed):
            ws.send("x" * 70_000)
        assert until_closed(ws) == []
    assert ws.close_code == 1009


def test_a_wrong_header_token_gets_the_close_only(served: tuple[BlockingPortal, Server]) -> None:
    _, server = served
    for value in ["Bearer wrong", "Basic " + TOKEN, "Bearer " + TOKEN.upper()]:
        with open_socket(server, additional_headers={"Authorization": value}) as ws:
            assert until_closed(ws) == []
        assert ws.close_code == 4401, value


def test_while_draining_only_an_authenticated_socket_is_told_why(
    served: tuple[BlockingPortal, Server],
) -> None:
    portal, server = served
    assert server.state is not None
    portal.call(server.state.draining.set)
    try:
        with open_socket(server) as ws:
            assert until_closed(ws) == []
        assert ws.close_code == 1013 and ws.close_reason == "draining"
        header = {"Authorization": f"Bearer {TOKEN}"}
        with open_socket(server, additional_headers=header) as ws:
            told = until_closed(ws)
        assert [json.loads(text)["code"] for text in told] == ["draining"]
    finally:
        portal.call(_undrain, server)


def _undrain(server: Server) -> None:
    import anyio

    assert server.state is not None
    server.state.draining = anyio.Event()


def test_once_authenticated_the_client_is_answered(served: tuple[BlockingPortal, Server]) -> None:
    """The other side of the rule: a right token in session.start opens the session,
    and a header token lets the client hear why its start is refused."""
    _, server = served
    with open_socket(server) as ws:
        ws.send(json.dumps({"type": "session.start", "token": TOKEN}))
        assert json.loads(ws.recv(timeout=GUARD_S))["type"] == "session.started"
    with open_socket(server, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send(json.dumps({"type": "session.start", "pipeline": "nope"}))
        assert json.loads(ws.recv(timeout=GUARD_S))["code"] == "pipeline_not_allowed"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(st.sampled_from(PRE_AUTH) | st.text(max_size=40) | st.binary(max_size=40), max_size=6)
)
def test_any_sequence_before_the_token_gets_the_close_only(
    served: tuple[BlockingPortal, Server], messages: list[str | bytes]
) -> None:
    _, server = served
    with open_socket(server) as ws:
        for message in messages:
            try:
                ws.send(message)
            except ConnectionClosed:
                break
        assert until_closed(ws) == []
    assert ws.close_code in (4401, 4408)
