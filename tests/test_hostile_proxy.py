"""Hostile probes: a server behind a proxy on its own machine, where every client
arrives from 127.0.0.1. Loopback is trusted only when nothing says the server
is reached from elsewhere (server/trust.py): a public name needs a token at
start-up, and a request that carries a proxy's marks is never local."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.serve_helpers import GUARD_S, running_server, start
from voice_membrane.cli import main
from voice_membrane.server import Server
from voice_membrane.server.trust import PROXY_HEADERS, public_name
from voice_membrane.testing.fake_twilio import CallRefused, twilio_call

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parent.parent
TOKEN = "a-token-of-24-characters"
PUBLIC = "voice.example.com"
# What nginx, Caddy or HAProxy (option forwardfor) add for the client they forward.
FORWARDED_FOR = [("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-Proto", "https")]


@asynccontextmanager
async def forwarder(
    target_port: int, host: str | None, headers: Sequence[tuple[str, str]]
) -> AsyncIterator[int]:
    """A reverse proxy on this machine, as a TLS terminator is (minus the TLS): it
    connects to serve from 127.0.0.1, sets the ``Host`` (None: the client's, as
    Caddy does) and adds ``headers`` to each request. Its port."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = int(listener.extra(anyio.abc.SocketAttribute.local_port))

    async def handle(client: SocketStream) -> None:
        async with client, await anyio.connect_tcp("127.0.0.1", target_port) as upstream:
            head = b""
            while b"\r\n\r\n" not in head:
                head += await client.receive()
            head, _, rest = head.partition(b"\r\n\r\n")
            request_line, *lines = head.decode("latin-1").split("\r\n")
            if host is not None:
                lines = [x for x in lines if not x.lower().startswith("host:")]
                lines.append(f"Host: {host}")
            lines += [f"{name}: {value}" for name, value in headers]
            await upstream.send(("\r\n".join([request_line, *lines]) + "\r\n\r\n").encode())
            if rest:
                await upstream.send(rest)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pipe, client, upstream, tg.cancel_scope)
                await _pipe(upstream, client, tg.cancel_scope)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        yield port
        tg.cancel_scope.cancel()


async def _pipe(source: SocketStream, sink: SocketStream, scope: anyio.CancelScope) -> None:
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        async for chunk in source:
            await sink.send(chunk)
    scope.cancel()


async def refused_logins(server: Server) -> dict[str, float]:
    """``voice_membrane_refused_logins_total`` by reason, scraped from /metrics."""
    text = await anyio.to_thread.run_sync(scrape, f"{server.url}/metrics")
    pattern = r'^voice_membrane_refused_logins_total\{reason="(\w+)"\} (\S+)$'
    return {m[1]: float(m[2]) for m in re.finditer(pattern, text, re.MULTILINE)}


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=GUARD_S) as answer:
        return str(answer.read().decode())


async def session_status(url: str, headers: Sequence[tuple[str, str]] = ()) -> int:
    """101 when a session started (``session.started``), else the upgrade's status."""
    try:
        async with connect(url, additional_headers=list(headers)) as ws:
            await start(ws)
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


async def call_status(url: str) -> int:
    """101 when the unsigned call's upgrade was taken, else its status."""
    try:
        async with twilio_call(url):
            return 101
    except CallRefused as exc:
        return exc.status


# Behind a forwarder, a server with no token serves no one


async def test_a_server_without_a_token_serves_no_one_through_a_forwarder(
    tmp_path: Path,
) -> None:
    async with running_server(tmp_path) as server:
        # Plain local use keeps working without a token: a session and an unsigned call.
        assert await session_status(server.ws_url) == 101
        assert await call_status(server.ws_url.replace("/v1/session", "/v1/twilio")) == 101
        # The forwarder rewrites the Host to serve's own (nginx's default) and says
        # whom it forwards, as every proxy configuration does.
        target = f"127.0.0.1:{server.port}"
        async with forwarder(server.port, target, FORWARDED_FOR) as port:
            assert await session_status(f"ws://127.0.0.1:{port}/v1/session") == 403
            assert await call_status(f"ws://127.0.0.1:{port}/v1/twilio") == 403
        assert server.state is not None and server.state.sessions == 0
        assert (await refused_logins(server))["proxied"] == 2


@pytest.mark.parametrize("header", PROXY_HEADERS)
async def test_any_proxy_header_makes_a_request_not_local(tmp_path: Path, header: str) -> None:
    value = "for=203.0.113.7;proto=https" if header == "Forwarded" else "203.0.113.7"
    async with running_server(tmp_path) as server:
        assert await session_status(server.ws_url, [(header, value)]) == 403
        assert (await refused_logins(server)) == {
            "proxied": 1,
            "wrong_token": 0,
            "no_token": 0,
            "twilio_signature": 0,
        }


async def test_a_public_name_takes_no_unsigned_call_even_from_loopback(tmp_path: Path) -> None:
    """With a token but no Twilio auth token, a server answering to a public name
    refuses unsigned calls, whatever its forwarder adds (here: nothing)."""
    async with running_server(tmp_path, token=TOKEN, allow_hosts=[PUBLIC]) as server:
        async with forwarder(server.port, PUBLIC, []) as port:
            # The forwarder works: a session with the token starts through it.
            async with connect(f"ws://127.0.0.1:{port}/v1/session") as ws:
                await start(ws, token=TOKEN)
            assert await call_status(f"ws://127.0.0.1:{port}/v1/twilio") == 403
        assert await call_status(server.ws_url.replace("/v1/session", "/v1/twilio")) == 403
        assert (await refused_logins(server))["proxied"] == 2


# A public name, or an empty secret, stops serve at start-up in one line


def serve_cli(*args: str, **variables: str) -> subprocess.Popen[str]:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", **variables}
    command = [sys.executable, "-m", "voice_membrane.cli", "serve"]
    command += ["--pipeline", "pipelines/replay.toml", "--port", "0", *args]
    return subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_serve_refuses_a_public_name_without_a_token_in_one_line() -> None:
    cases = {  # what is refused: the words its line must hold
        "public name": (("--allow-host", PUBLIC), {}, "without a token"),
        "empty auth token": ((), {"TWILIO_AUTH_TOKEN": ""}, "TWILIO_AUTH_TOKEN) is empty"),
    }
    # At once: each is a Python start-up.
    running = {name: serve_cli(*args, **env) for name, (args, env, _) in cases.items()}
    for name, process in running.items():
        try:
            out, err = process.communicate(timeout=120)
        finally:
            process.kill()
        assert process.returncode not in (0, None), (name, out, err)
        assert "Traceback" not in err and "listening" not in out, (name, err)
        lines = err.splitlines()
        assert len(lines) == 1 and cases[name][2] in lines[0], (name, err)
        assert lines[0].startswith("voice-membrane serve: "), (name, err)


TWILIO_URL = ("--twilio-url", f"wss://{PUBLIC}/v1/twilio")


@pytest.mark.parametrize(
    ("args", "variables", "expected"),
    [
        (("--allow-host", f"{PUBLIC}:443", "--workers", "2"), {}, "without a token"),
        (TWILIO_URL, {}, "without a token"),
        (TWILIO_URL, {"VOICE_MEMBRANE_TOKEN": TOKEN}, "--twilio-url without TWILIO_AUTH_TOKEN"),
        (("--allow-host", PUBLIC), {"VOICE_MEMBRANE_TOKEN": "short-token"}, "at least 16"),
        ((), {"VOICE_MEMBRANE_TOKEN": ""}, "the token is empty"),
        (("--token", ""), {}, "the token is empty"),
    ],
)
def test_serve_refuses_what_would_trust_a_proxy(
    args: tuple[str, ...],
    variables: dict[str, str],
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same refusals in this process (a Python start-up each would be slow):
    a server or group that got past them would fail the test, not start."""
    from voice_membrane.server import run

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("serve started")

    monkeypatch.setattr(run.Server, "__aenter__", started)
    monkeypatch.setattr(run, "WorkerGroup", started)
    for name in ("VOICE_MEMBRANE_TOKEN", "TWILIO_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as refused:
        main(["serve", "--pipeline", str(REPO / "pipelines/replay.toml"), "--port", "0", *args])
    line = str(refused.value.code)
    assert line.startswith("voice-membrane serve: ") and expected in line and "\n" not in line
    assert "short-token" not in line


def test_public_names() -> None:
    assert public_name(["localhost", "127.0.0.1:9000", "[::1]"], None) is None
    assert public_name([], "wss://127.0.0.1:8443/v1/twilio") is None
    assert public_name(["localhost", PUBLIC], None) == PUBLIC
    assert public_name([], f"wss://{PUBLIC}/v1/twilio") == PUBLIC
    assert public_name(["10.0.0.5"], None) == "10.0.0.5"
