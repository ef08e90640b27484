"""``Server``: the WebSocket endpoint, the page and the operations endpoints on one port.

::

    async with Server(["pipelines/replay.toml"], port=0) as server:
        print(server.url)            # http://127.0.0.1:PORT; sessions at server.ws_url
        await server.serve_forever() # until drain() (SIGTERM in the CLI) or cancellation

Engines and models load once per process (``preload``) and are shared by the
sessions: the embedded LLM and the Piper voice keep process-wide caches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup
from websockets.asyncio.server import Server as WsServer
from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as ws_serve
from websockets.datastructures import MultipleValuesError
from websockets.http11 import Request, Response

from ..infra.redact import remember
from ..pipeline.build import build_parts
from ..pipeline.config import ConfigError, PipelineConfig, load_pipeline
from . import carrier_routes, twilio_routes
from . import protocol as p
from .carrier_routes import CarrierRoutes
from .connection import Connection
from .cross_origin import listed_origin, preflight, readable_by
from .hosts import HostRules, listens_on_loopback
from .http_post import Posted
from .http_routes import STATIC_DIR, origin_allowed, response, route
from .listening_setup import check_listening
from .log import JsonLog, Log
from .post_connection import posting_connection
from .prometheus import CarrierRefusal, RefusedLogin
from .reconnecting_store import store_for
from .serve_config import SessionSettings
from .session_store import SessionStore, StoreUnavailable
from .state import ServerState
from .trust import is_local, public_name, secrets_problem
from .twilio_call import TwilioCall
from .twilio_call_token import CallTokens
from .twilio_wire import TWILIO_PATH
from .twiml import url_problem

if TYPE_CHECKING:
    from .webrtc_host import WebRtcHost

DEFAULT_PORT = 8765
STOP_NOW_GRACE_S = 1.0  # a second Ctrl-C: what the closing handshakes get before cancelling
NOT_LOCAL = (
    "this server has no token: it takes sessions from this machine only, not through a "
    "proxy (docs/serve.md)"
)


class Server:
    """``pipelines``: pipeline files (or loaded configs by name); clients pick one by
    name (the file's stem), the first is the default. Raises ``ConfigError`` (one
    line) for a bad pipeline, a server reached from elsewhere (a host that is not
    loopback, a public ``allow_hosts`` or ``twilio_url`` name) without a token,
    or an empty secret (trust.py)."""

    def __init__(
        self,
        pipelines: Sequence[str | Path] | dict[str, PipelineConfig],
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        allow_origins: Iterable[str] = (),
        allow_hosts: Iterable[str] = (),
        drain_timeout_s: float = 30.0,
        idle_timeout_s: float = 300.0,
        log: Log | None = None,
        static_dir: Path = STATIC_DIR,
        preload: bool = True,
        twilio_auth_token: str | None = None,
        twilio_url: str | None = None,
        telnyx_public_key: str | None = None,
        telnyx_url: str | None = None,
        plivo_auth_token: str | None = None,
        plivo_url: str | None = None,
        reuse_port: bool = False,
        sessions: SessionSettings | None = None,
        webrtc: bool = False,
        ice_servers: Iterable[str] = (),
        **limits: Any,
    ) -> None:
        if not pipelines:
            raise ConfigError("serve needs at least one pipeline")
        self.pipelines = (
            dict(pipelines) if isinstance(pipelines, dict) else _load_pipelines(pipelines)
        )
        check_listening(self.pipelines)
        allow_hosts = tuple(allow_hosts)
        loopback = listens_on_loopback(host)
        try:
            self.hosts = HostRules.for_listener(host, port, allow_hosts, loopback=loopback)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if twilio_url is not None and (problem := url_problem(twilio_url)):
            raise ConfigError(f"--twilio-url: {problem}")
        # Reached from beyond this machine: on its address, or by a public name a
        # proxy on this machine forwards from loopback (trust.py).
        public = (
            host if not loopback else public_name(allow_hosts, twilio_url, telnyx_url, plivo_url)
        )
        if problem := secrets_problem(public, token, twilio_auth_token, twilio_url):
            raise ConfigError(problem)
        # Telnyx's and Plivo's calls (/v1/telnyx, /v1/plivo; docs/telephony.md)
        self.carriers = CarrierRoutes(
            session_token=token,
            telnyx_public_key=telnyx_public_key,
            telnyx_url=telnyx_url,
            plivo_auth_token=plivo_auth_token,
            plivo_url=plivo_url,
        )
        self.exposed = public is not None
        self.host, self.port, self.token = host, port, token
        remember(token)  # masked in every event, log line and message from now on
        # Phone calls (/v1/twilio): signed with the Twilio account's auth token, for
        # the public URL Twilio calls (docs/telephony.md).
        self.twilio_auth_token, self.twilio_url = twilio_auth_token, twilio_url
        remember(twilio_auth_token)
        self.allow_origins = {o.rstrip("/").lower() for o in allow_origins}
        self.drain_timeout_s, self.idle_timeout_s = drain_timeout_s, idle_timeout_s
        self.log = log or JsonLog()
        self.static_dir = static_dir
        self.preload = preload
        # A worker of ``serve --workers N``: its siblings bind the same port (workers.py).
        self.reuse_port = reuse_port
        self.sessions = sessions or SessionSettings()  # the session store (resume)
        self.limits = limits  # ServerState fields (queue bounds, timeouts), for tests and tuning
        self.state: ServerState | None = None
        # POST /v1/webrtc/offer (docs/webrtc.md), when aiortc is installed: the
        # CLI's default, an embedding's choice (its tests drive the WebSocket).
        self.webrtc_wanted, self.ice_servers = webrtc, tuple(ice_servers)
        for url in self.ice_servers:
            if not url.startswith(("stun:", "turn:", "turns:")):
                raise ConfigError(f"--ice-server {url[:100]!r}: a stun:, turn: or turns: URL")
        self.webrtc: WebRtcHost | None = None
        self._ws: WsServer | None = None
        self._tasks: TaskGroup | None = None  # the server's own (the store's keep_up)
        self._keeping: anyio.CancelScope | None = None
        self._done: anyio.Event | None = None
        self.stopped_by: int | None = None  # the signal that began the stop (run.py)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http") + p.SESSION_PATH

    async def __aenter__(self) -> Server:
        log = self.log
        settings = self.sessions
        store = store_for(settings.store, settings.grace_s, settings.max_bytes, log)
        try:
            await store.open()  # Redis unreachable at start: one line, no server
        except StoreUnavailable as exc:
            raise ConfigError(str(exc)) from None
        self.state = ServerState(
            self.pipelines,
            token=self.token,
            idle_timeout_s=self.idle_timeout_s,
            drain_timeout_s=self.drain_timeout_s,
            log=self.log,
            store=store,
            **self.limits,
        )
        store.on_back = self.state.write_again  # a Redis back from an outage
        self._done = anyio.Event()
        if self.twilio_auth_token is not None:
            self.state.call_tokens = CallTokens(self.twilio_auth_token)
        self.carriers.count_from_zero(self.state.metrics)
        if self.preload:
            await self._preload()
        self._ws = await ws_serve(
            self._handle,
            self.host,
            self.port,
            process_request=self._process_request,
            max_size=p.MAX_MESSAGE_BYTES,
            compression=None,  # audio does not compress; per-message deflate costs CPU
            server_header=None,
            close_timeout=self.state.close_timeout_s,
            logger=_quiet_logger(),
            create_connection=posting_connection(self._post),
            reuse_port=self.reuse_port or None,
        )
        sockets = self._ws.sockets
        self.port = sockets[0].getsockname()[1]
        self.hosts = dataclasses.replace(self.hosts, port=self.port)
        self.log(
            "listening",
            url=self.url,
            pipelines=list(self.pipelines),
            session_store=store.name,
            grace_s=settings.grace_s,
        )
        # (the body of ``async with`` runs in this group: ``close`` cancels only
        # its task, from whichever task drains)
        self._keeping = anyio.CancelScope()
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self._keep_store_up, store)
        if self.webrtc_wanted and webrtc_installed():
            from .webrtc_host import WebRtcHost

            self.webrtc = WebRtcHost(self.state, self.ice_servers)
            self._tasks.start_soon(self.webrtc.run)
        return self

    async def _keep_store_up(self, store: SessionStore) -> None:
        assert self._keeping is not None
        with self._keeping:
            await store.keep_up()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
        if self._tasks is not None:
            tasks, self._tasks = self._tasks, None
            await tasks.__aexit__(None, None, None)  # (the body's exception goes on as it is)

    async def _preload(self) -> None:
        """Load each pipeline's models and voices once, now, not in the first session
        (the process-wide caches keep them), and start its MCP servers once (each
        session then starts its own): a broken pipeline fails the start."""
        for config in self.pipelines.values():
            parts = build_parts(config.with_overrides({"sink": {"kind": "null"}}))
            async with AsyncExitStack() as stack:
                provider = parts.membrane.provider
                await provider.start()
                stack.push_async_callback(provider.aclose)
                await parts.engine.start()
                stack.push_async_callback(parts.engine.aclose)
                if parts.toolbox is not None:  # its MCP servers start and list their tools
                    await stack.enter_async_context(parts.toolbox)

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        assert self.state is not None
        state = self.state
        checked = self._host(connection, request)
        if isinstance(checked, Response):
            return checked
        host, local_ip = checked
        path = request.path.partition("?")[0]
        peer = connection.remote_address
        peer_ip = peer[0] if isinstance(peer, tuple) and peer else None
        # Trusted without a secret: a local client of a server nobody else reaches
        # (trust.py); a proxy on this machine brings the internet from loopback.
        local = not self.exposed and is_local(request.headers, peer_ip)
        if path in twilio_routes.PATHS:
            return twilio_routes.request(
                request,
                path,
                host,
                local,
                twilio_url=self.twilio_url,
                auth_token=self.twilio_auth_token,
                call_tokens=state.call_tokens,
                log=self.log,
                refuse=self._refuse_login,
            )
        if path in carrier_routes.PATHS:  # Telnyx's, Plivo's
            return self.carriers.request(request, path, host, local, self._refuse_login)
        if path == p.SESSION_PATH and self.token is None and not local:
            return self._refuse_login(path, "proxied", NOT_LOCAL)
        return route(
            request,
            allowed_origins=self.allow_origins,
            own_origin=lambda origin: self.hosts.allows_origin(origin, local_ip),
            ready=lambda: not state.draining.is_set(),
            metrics=state.metrics.render,
            static_dir=self.static_dir,
        )

    def _host(
        self, connection: ServerConnection, request: Request
    ) -> tuple[str, str | None] | Response:
        """The request's Host and the socket's own address, or the refusal: the
        Host first, for every route and the upgrade, as a DNS-rebound page names
        its attacker's host (the page's own origins are these names, never
        whatever the Host says)."""
        ours = connection.local_address  # (the socket's own address)
        local_ip = ours[0] if isinstance(ours, tuple) and ours else None
        try:
            host = request.headers.get("Host")
        except MultipleValuesError:
            return response(400, "more than one Host header\n")
        if host is None:
            return response(400, "no Host header\n")
        if not self.hosts.allows_host(host, local_ip):
            self.log("http_refused", status=421, host=host[:100], path=request.path[:100])
            return response(421, "this server does not answer to that host name\n")
        return host, local_ip

    def _refuse_login(
        self, path: str, why: RefusedLogin | CarrierRefusal, message: str
    ) -> Response:
        assert self.state is not None
        self.state.metrics.refused_logins.labels(why).inc()
        self.log("http_refused", status=403, path=path, reason=message)
        return response(403, message + "\n")

    async def _post(self, connection: ServerConnection, posted: Posted) -> Response:
        """A POST: the WebRTC offer (webrtc_offer.py), or its CORS preflight
        (cross_origin.py), after the Host check every request of the port gets."""
        checked = self._host(connection, posted.request)
        if isinstance(checked, Response):
            return checked
        if posted.request.method == "OPTIONS":
            return preflight(posted.request, self.allow_origins, p.OFFER_PATH)
        reply = (  # (a 404 readable by a listed origin's page too: it falls back)
            await self._offer(connection, posted, checked[1])
            if self.webrtc is not None
            else response(404, "not found (WebRTC needs aiortc: the webrtc extra)\n")
        )
        return readable_by(reply, listed_origin(posted.request, self.allow_origins))

    async def _offer(
        self, connection: ServerConnection, posted: Posted, local_ip: str | None
    ) -> Response:
        assert self.state is not None and self.webrtc is not None
        from .webrtc_offer import offer_route

        peer = connection.remote_address
        peer_ip = peer[0] if isinstance(peer, tuple) and peer else None
        if self.token is None and (self.exposed or not is_local(posted.request.headers, peer_ip)):
            return self._refuse_login(p.OFFER_PATH, "proxied", NOT_LOCAL)
        origin_ok = origin_allowed(
            posted.request, self.allow_origins, lambda o: self.hosts.allows_origin(o, local_ip)
        )
        return await offer_route(posted, self.webrtc, self.state, origin_ok=origin_ok)

    async def _handle(self, ws: ServerConnection) -> None:
        assert self.state is not None
        request = ws.request
        path = request.path.partition("?")[0] if request is not None else ""
        if path == TWILIO_PATH:
            await TwilioCall(ws, self.state).run()
            return
        if path in carrier_routes.STREAMS:
            await self.carriers.call(ws, self.state, path).run()
            return
        await Connection(ws, self.state).run()

    async def serve_forever(self) -> None:
        """Until ``drain()`` or ``close()`` ends the server."""
        assert self._done is not None
        await self._done.wait()

    async def drain(self, timeout_s: float | None = None) -> None:
        """Stop accepting sessions (``/readyz`` 503, new sockets 1013), let running
        turns finish up to the drain timeout, close the rest with 1001, stop."""
        assert self.state is not None and self._ws is not None
        state = self.state
        timeout = self.drain_timeout_s if timeout_s is None else timeout_s
        if not state.draining.is_set():
            state.drain_deadline = anyio.current_time() + timeout
            state.draining.set()
            self.log("drain_start", sessions=state.sessions, turns=state.turns_running)
        # Each session closes itself once its turn is over (or cut at the deadline);
        # a moment more for the closing handshakes.
        with anyio.move_on_after(timeout + state.close_timeout_s + 1):
            while state.sessions:
                await anyio.sleep(0.05)
        self.log("drain_end", sessions=state.sessions)
        await self.close()

    @property
    def turns_running(self) -> int:
        return 0 if self.state is None else self.state.turns_running

    async def stop_now(self) -> None:
        """Stop without waiting for the running turns: close every socket (1001),
        which cancels its session's LLM and TTS work, and cancel what is left
        after a short grace."""
        await self.close(grace_s=STOP_NOW_GRACE_S)

    async def close(self, grace_s: float | None = None) -> None:
        """Close every connection (1001) and stop listening."""
        if grace_s is None:
            grace_s = (self.state.close_timeout_s if self.state else 10.0) + 5.0
        if self.webrtc is not None:  # (its sessions close as the sockets' do)
            webrtc, self.webrtc = self.webrtc, None
            await webrtc.close(grace_s)
        if self._ws is not None:
            ws, self._ws = self._ws, None
            ws.close()
            # Each session ends once its socket closes; should one not (a bug), its
            # handler is cancelled rather than keep the process from exiting.
            with anyio.move_on_after(grace_s):
                await ws.wait_closed()
            for task in list(ws.handler_tasks):
                task.cancel()
            with anyio.CancelScope(shield=True):
                await ws.wait_closed()
        if self._keeping is not None:
            self._keeping.cancel()
        if self.state is not None:
            self.state.heartbeat.stop()
            await self.state.store.aclose()
        if self._done is not None:
            self._done.set()


def _load_pipelines(paths: Sequence[str | Path]) -> dict[str, PipelineConfig]:
    pipelines: dict[str, PipelineConfig] = {}
    for path in paths:
        name = Path(path).stem
        if name in pipelines:
            raise ConfigError(f"two pipelines are named {name!r}: rename one file")
        pipelines[name] = load_pipeline(path)
    return pipelines


def webrtc_installed() -> bool:
    """aiortc (the webrtc extra) is importable."""
    import importlib.util

    return importlib.util.find_spec("aiortc") is not None


def _quiet_logger() -> Any:
    """websockets logs each failed handshake (a port scan, a plain GET to the socket
    path) at INFO/ERROR with a traceback; our own log says what matters."""
    import logging

    logger = logging.getLogger("voice_membrane.server.websockets")
    logger.setLevel(logging.CRITICAL)
    return logger
