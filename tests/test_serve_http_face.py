"""serve's HTTP face: the security headers on every response (the routes', and the
ones websockets writes itself), and the Host names it answers to (DNS rebinding).

Requests go out with http.client, so each test chooses its Host header (or none,
or two), against servers running in a thread of their own for the module.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal

from tests.serve_helpers import GUARD_S, running_server
from voice_membrane.pipeline.config import ConfigError
from voice_membrane.server import Server

UPGRADE = [
    ("Connection", "Upgrade"),
    ("Upgrade", "websocket"),
    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ("Sec-WebSocket-Version", "13"),
]
TOKEN = "a-token-of-24-characters"


def request(
    port: int,
    path: str = "/",
    hosts: list[str] | None = None,
    headers: Sequence[tuple[str, str]] = (),
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """GET ``path`` with these ``Host`` headers (None: ``127.0.0.1:PORT``)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=GUARD_S)
    try:
        connection.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        for host in [f"127.0.0.1:{port}"] if hosts is None else hosts:
            connection.putheader("Host", host)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, answer.headers, answer.read()
    finally:
        connection.close()


def raw(port: int, data: bytes) -> tuple[int, http.client.HTTPMessage]:
    """Send ``data`` as it is (a request websockets refuses while parsing it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD_S) as sock:
        sock.sendall(data)
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        return answer.status, answer.headers


def assert_secure(headers: http.client.HTTPMessage) -> None:
    policy = headers.get_all("Content-Security-Policy") or []
    assert len(policy) == 1, policy
    directives = {d.split()[0]: d.split()[1:] for d in policy[0].split(";") if d.strip()}
    assert directives["default-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]
    for kind in ("script-src", "style-src", "connect-src"):  # nothing inline, nothing else
        assert directives[kind] == ["'self'"], kind
    assert headers.get_all("X-Frame-Options") == ["DENY"]
    assert headers.get_all("X-Content-Type-Options") == ["nosniff"]
    assert headers.get_all("Referrer-Policy") == ["no-referrer"]


@pytest.fixture(scope="module")
def loopback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("loopback")
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            # (a public name needs a token: a proxy brings everyone from loopback)
            running_server(
                folder, token=TOKEN, allow_hosts=["voice.example.com", "proxy.example:8443"]
            )
        ) as server,
    ):
        yield server


# Every response carries the headers


ROUTES = [
    ("/", 200),
    ("/index.html", 200),
    ("/static/app.js", 200),
    ("/static/style.css", 200),
    ("/static/player-worklet.js", 200),
    ("/healthz", 200),
    ("/readyz", 200),
    ("/metrics", 200),
    ("/nope", 404),
    ("/static/../server.py", 404),
    ("/static/missing.js", 404),
    ("/v1/session", 426),  # websockets' own answer to a GET that is no upgrade
]


@pytest.mark.parametrize(("path", "status"), ROUTES)
def test_every_route_carries_the_security_headers(loopback: Server, path: str, status: int) -> None:
    got, headers, _ = request(loopback.port, path)
    assert got == status
    assert_secure(headers)


def test_refusals_carry_them_too(loopback: Server) -> None:
    port = loopback.port
    evil_origin = [("Origin", "http://evil.example"), *UPGRADE]
    refused = [
        request(port, "/v1/session", headers=evil_origin),  # 403: origin
        request(port, "/", hosts=["evil.example"]),  # 421: host
        request(port, "/", hosts=[]),  # 400: no Host
        request(port, "/v1/session", headers=[("Sec-WebSocket-Version", "13"), *UPGRADE[:2]]),
    ]
    assert [status for status, _, _ in refused] == [403, 421, 400, 400]
    for _, headers, _ in refused:
        assert_secure(headers)
    # Refused by websockets while it parses, before any hook: 414 and 431.
    for data, status in [
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 431),
    ]:
        got, headers = raw(port, data)
        assert got == status
        assert_secure(headers)


def test_the_upgrade_itself_is_not_a_page(loopback: Server) -> None:
    status, headers, _ = request(loopback.port, "/v1/session", headers=UPGRADE)
    assert status == 101
    assert headers.get("Content-Security-Policy") is None


# The Host names it answers to


def own_hosts(port: int) -> list[str]:
    return [
        f"127.0.0.1:{port}",
        f"localhost:{port}",
        f"[::1]:{port}",
        f"[0:0:0:0:0:0:0:1]:{port}",
        f"LOCALHOST:{port}",
        f"LocalHost.:{port}",  # one trailing dot: the same name
        f"127.0.0.1.:{port}",
    ]


def foreign_hosts(port: int) -> list[str]:
    return [
        f"evil.example:{port}",  # a rebound name
        f"evil.example.:{port}",
        f"localhost.evil.example:{port}",
        f"127.0.0.1.evil.example:{port}",
        "evil.example",
        f"localhost:{port + 1}",  # another port
        "localhost",  # port 80 (or 443)
        "127.0.0.1",
        f"localhost..:{port}",
        f"user@localhost:{port}",
        f"localhost:{port}@evil.example",
        f"localhost:{port}/x",
        f"localhost:0{port}0",
        f"localhost:{port}:{port}",
        f"[::1%lo]:{port}",
        f"[127.0.0.1]:{port}",
        f"127.1:{port}",  # another spelling of loopback no browser sends
        f"2130706433:{port}",
        f"0.0.0.0:{port}",
        f"[::]:{port}",
        f" :{port}",
        "",
        "proxy.example",  # configured with port 8443 only
        "proxy.example:8444",
    ]


@pytest.mark.parametrize("path", ["/", "/metrics", "/healthz", "/static/app.js", "/nope"])
def test_each_route_answers_its_own_names_only(loopback: Server, path: str) -> None:
    port = loopback.port
    for host in own_hosts(port):
        assert request(port, path, hosts=[host])[0] in (200, 404), host
    for host in foreign_hosts(port):
        status, _, body = request(port, path, hosts=[host])
        assert status == 421, host
        assert b"metrics" not in body and b"<html" not in body


def test_the_upgrade_is_checked_too(loopback: Server) -> None:
    port = loopback.port
    for host in own_hosts(port):
        assert request(port, "/v1/session", hosts=[host], headers=UPGRADE)[0] == 101, host
    for host in foreign_hosts(port):
        assert request(port, "/v1/session", hosts=[host], headers=UPGRADE)[0] == 421, host


def test_a_missing_or_doubled_host_is_a_bad_request(loopback: Server) -> None:
    port = loopback.port
    assert request(port, "/", hosts=[])[0] == 400
    assert request(port, "/", hosts=[f"localhost:{port}", f"localhost:{port}"])[0] == 400
    assert request(port, "/", hosts=[f"localhost:{port}", "evil.example"])[0] == 400
    assert request(port, "/v1/session", hosts=[], headers=UPGRADE)[0] == 400


def test_configured_names(loopback: Server) -> None:
    port = loopback.port
    for host in [
        "voice.example.com",
        "voice.example.com:443",
        "Voice.Example.Com.:9",
        "proxy.example:8443",
    ]:
        assert request(port, "/healthz", hosts=[host])[0] == 200, host
    # A configured name is one of the page's own origins too.
    origin = [("Origin", "https://voice.example.com"), *UPGRADE]
    assert request(port, "/v1/session", hosts=["voice.example.com"], headers=origin)[0] == 101


def test_the_page_origin_follows_the_same_names(loopback: Server) -> None:
    port = loopback.port
    for origin, status in [
        (f"http://localhost:{port}", 101),
        (f"http://[::1]:{port}", 101),
        (f"http://127.0.0.1:{port}/", 101),
        (f"http://evil.example:{port}", 403),
        (f"http://localhost:{port + 1}", 403),
        ("http://localhost", 403),
        ("null", 403),
        (f"file://localhost:{port}", 403),
    ]:
        headers = [("Origin", origin), *UPGRADE]
        assert request(port, "/v1/session", headers=headers)[0] == status, origin


def test_a_wildcard_listener_answers_the_address_reached_and_the_machines_name(
    tmp_path: Path,
) -> None:
    """On 0.0.0.0: the address a request arrived on (here loopback, so the loopback
    names too) and the machine's host name; nothing else."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            running_server(tmp_path, host="0.0.0.0", token=TOKEN)
        ) as server,
    ):
        port = server.port
        for host in [f"127.0.0.1:{port}", f"localhost:{port}", f"{socket.gethostname()}:{port}"]:
            assert request(port, "/healthz", hosts=[host])[0] == 200, host
        for host in [f"0.0.0.0:{port}", f"evil.example:{port}", f"10.1.2.3:{port}"]:
            assert request(port, "/healthz", hosts=[host])[0] == 421, host


def test_a_bad_allowed_host_is_one_line(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text('[llm]\nspec = "local"\n', encoding="utf-8")
    for entry in ["a b", "http://x.example", "x.example:99999", "", "[::1"]:
        with pytest.raises(ConfigError, match="--allow-host") as refused:
            Server([pipeline], allow_hosts=[entry])
        assert "\n" not in str(refused.value)
