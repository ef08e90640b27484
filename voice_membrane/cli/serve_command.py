"""The ``serve`` command: its options, and one process or a group of workers."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from .common import (
    add_otel,
    default_pipeline,
    exit_if_user_error,
    one_line,
    start_tracing,
    token_option,
)

TWILIO_TOKEN_VARIABLE = "TWILIO_AUTH_TOKEN"
TELNYX_KEY_VARIABLE = "TELNYX_PUBLIC_KEY"
PLIVO_TOKEN_VARIABLE = "PLIVO_AUTH_TOKEN"


def add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve spoken sessions over a WebSocket, with a browser page",
        description="Serve sessions over a WebSocket (docs/websocket-protocol.md), the "
        "browser page at /, Prometheus metrics at /metrics, /healthz and /readyz. SIGTERM "
        "drains: running turns finish, new sessions are refused.",
    )
    serve.add_argument(
        "--pipeline",
        type=Path,
        action="append",
        help="a pipeline file clients may use, by its name (the file's stem); repeatable, "
        "the first is the default (default pipelines/local.toml)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (8765; 0: any free port)")
    serve.add_argument(
        "--token", help="the token clients must present (default: env VOICE_MEMBRANE_TOKEN)"
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help=(
            "a browser origin allowed to connect, e.g. https://app.example.com (repeatable);"
            " its pages may also POST the WebRTC offer (CORS)"
        ),
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="a Host name answered besides the listener's own, e.g. a proxy's "
        "voice.example.com (repeatable; docs/websocket-protocol.md)",
    )
    serve.add_argument(
        "--ice-server",
        action="append",
        default=[],
        metavar="URL",
        help="a STUN or TURN server for WebRTC sessions, e.g. stun:stun.example.com:3478 "
        "(repeatable; none by default: host candidates only; docs/webrtc.md)",
    )
    serve.add_argument(
        "--no-webrtc",
        action="store_true",
        help="answer no WebRTC offers (POST /v1/webrtc/offer): WebSocket sessions only",
    )
    serve.add_argument(
        "--send-buffer-ms",
        type=float,
        default=200.0,
        metavar="MS",
        help="the kernel send buffer of each session's socket, in ms of its audio "
        "(200: the lead; more for round trips over ~300 ms)",
    )
    serve.add_argument(
        "--drain-timeout", type=float, default=30.0, metavar="S", help="on SIGTERM (30)"
    )
    serve.add_argument(
        "--idle-timeout", type=float, default=300.0, metavar="S", help="close idle sessions (300)"
    )
    serve.add_argument(
        "--max-sessions",
        type=int,
        default=50,  # server.state.DEFAULT_MAX_SESSIONS, not imported: --help stays fast
        metavar="N",
        help="refuse more sessions at once with 1013, before building anything for them "
        "(50: what one process sustains on 2 cores, docs/benchmarks.md; 0: no limit)",
    )
    serve.add_argument(
        "--workers",
        type=_workers_option,
        default="auto",
        metavar="N",
        help="worker processes on the port, each its own event loop (auto: one per core, "
        "or 1 when a pipeline runs an engine on this machine; docs/serve.md)",
    )
    serve.add_argument(
        "--debug-audio-dir",
        type=Path,
        metavar="DIR",
        help="write each listening session's input audio to DIR/SESSION.wav, as the "
        "recognizer heard it (for debugging recognition; off: the voice is never stored)",
    )
    serve.add_argument(
        "--log-format",
        choices=("auto", "json", "text"),  # server.log.LOG_FORMATS, not imported: --help stays fast
        default="auto",
        help="stderr's log lines: text on a terminal, JSON otherwise (auto)",
    )
    serve.add_argument(
        "--twilio-url",
        metavar="URL",
        help="the public wss:// URL Twilio calls for /v1/twilio, as in the TwiML (the "
        "signature covers it; default: wss:// + the request's Host); the account's auth "
        f"token comes from env {TWILIO_TOKEN_VARIABLE} (docs/telephony.md)",
    )
    serve.add_argument(
        "--telnyx-url",
        metavar="URL",
        help="the public wss:// URL Telnyx streams calls to (/v1/telnyx), as in the TeXML "
        "serve answers at /v1/telnyx/texml (default: wss:// + the request's Host); the "
        f"webhooks' public key comes from env {TELNYX_KEY_VARIABLE} (docs/telephony.md)",
    )
    serve.add_argument(
        "--plivo-url",
        metavar="URL",
        help="the public wss:// URL Plivo streams calls to (/v1/plivo), as in the XML serve "
        "answers at /v1/plivo/answer (the signature covers it; default: wss:// + the "
        f"request's Host); the auth token comes from env {PLIVO_TOKEN_VARIABLE} "
        "(docs/telephony.md)",
    )
    serve.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="serve settings in TOML: [sessions] store, grace_s, max_bytes (docs/serve.md)",
    )
    serve.add_argument(
        "--session-store",
        metavar="URL",
        help="where sessions wait to be resumed: memory (default) or redis://HOST:PORT/DB, "
        "shared by every process and replica (overrides the config file's; a URL with a "
        "password: set env VOICE_MEMBRANE_SESSION_STORE instead, ps shows a command line)",
    )
    add_otel(serve)


def serve(args: argparse.Namespace, argv: Sequence[str]) -> None:
    from ..server.log import make_log
    from ..server.run import run_server, store_warning, workers_wanted

    token = token_option(args.token, "serve")
    for flag, value in (
        ("--send-buffer-ms", args.send_buffer_ms),
        ("--drain-timeout", args.drain_timeout),
        ("--idle-timeout", args.idle_timeout),
    ):
        if not value > 0:
            sys.exit(f"voice-membrane serve: {flag} must be > 0")
    if args.max_sessions < 0:
        sys.exit("voice-membrane serve: --max-sessions must be ≥ 0 (0: no limit)")
    if not 0 <= args.port <= 65535:
        sys.exit("voice-membrane serve: --port must be 0 to 65535")
    sessions = session_settings(args)
    pipelines = args.pipeline or [default_pipeline()]
    try:
        workers = workers_wanted(args.workers, pipelines)
    except Exception as exc:
        exit_if_user_error("serve", exc)
        raise
    if workers > 1:
        notice = store_warning(sessions.store, workers)
        _serve_group(args, workers, pipelines, token, sessions, argv, notice)
        return
    shutdown_tracing = start_tracing("serve", args)
    try:
        interrupted = anyio.run(
            partial(
                run_server,
                pipelines,
                host=args.host,
                port=args.port,
                token=token,  # empty: refused by Server, never taken as unset
                allow_origins=args.allow_origin,
                allow_hosts=args.allow_host,
                send_buffer_s=args.send_buffer_ms / 1000,
                drain_timeout_s=args.drain_timeout,
                idle_timeout_s=args.idle_timeout,
                max_sessions=args.max_sessions or None,  # 0: no limit
                debug_audio_dir=args.debug_audio_dir,
                log=make_log(args.log_format),
                twilio_auth_token=os.environ.get(TWILIO_TOKEN_VARIABLE),
                twilio_url=args.twilio_url,
                telnyx_public_key=os.environ.get(TELNYX_KEY_VARIABLE),
                telnyx_url=args.telnyx_url,
                plivo_auth_token=os.environ.get(PLIVO_TOKEN_VARIABLE),
                plivo_url=args.plivo_url,
                sessions=sessions,
                webrtc=not args.no_webrtc,
                ice_servers=args.ice_server,
            )
        )
    except Exception as exc:
        exit_if_user_error("serve", exc)
        raise
    finally:
        shutdown_tracing()
    if interrupted:
        sys.exit(130)  # stopped by Ctrl-C (SIGTERM's drain exits 0)


def _workers_option(value: str) -> str | int:
    if value == "auto":
        return value
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError("--workers is auto or a number ≥ 1")
    return int(value)


def _serve_group(
    args: argparse.Namespace,
    workers: int,
    pipelines: list[Path],
    token: str | None,
    sessions: Any,
    argv: Sequence[str],
    notice: str | None,
) -> None:
    """``serve --workers N``: this process supervises N ``serve`` processes (the
    same command) on one port (server/workers.py); ``notice``, said on stderr
    once they listen. The token and the store's URL reach the workers in their
    environment, never on their command lines."""
    from ..server.log import make_log
    from ..server.run import run_group
    from ..server.workers import GroupError

    command = [sys.executable, "-m", "voice_membrane.cli", *_worker_argv(argv)]
    try:
        code = anyio.run(
            partial(
                run_group,
                pipelines,
                workers,
                command,
                host=args.host,
                port=args.port,
                token=token,  # empty: refused by Server, never taken as unset
                allow_hosts=args.allow_host,
                # checked here, before any worker starts (each reads them as this did)
                twilio_auth_token=os.environ.get(TWILIO_TOKEN_VARIABLE),
                twilio_url=args.twilio_url,
                telnyx_public_key=os.environ.get(TELNYX_KEY_VARIABLE),
                telnyx_url=args.telnyx_url,
                plivo_auth_token=os.environ.get(PLIVO_TOKEN_VARIABLE),
                plivo_url=args.plivo_url,
                drain_timeout_s=args.drain_timeout,
                log=make_log(args.log_format),
                notice=notice,
                sessions=sessions,
            )
        )
    except GroupError as exc:  # quiet: the worker's own line said why
        sys.exit(1 if exc.quiet else f"voice-membrane serve: {exc}")
    except Exception as exc:
        exit_if_user_error("serve", exc)
        raise
    sys.exit(code)


# Options whose values the workers get in their environment, not in ``ps``: the
# token, and the session store's URL (its password).
_SECRET_OPTIONS = ("--token", "--session-store")


def _worker_argv(argv: Sequence[str]) -> list[str]:
    """The command line without ``_SECRET_OPTIONS`` and their values, however
    spelled (``--opt V``, ``--opt=V``, or a prefix argparse took for it)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        name, equals, _ = arg.partition("=")
        secret = len(name) > 2 and any(option.startswith(name) for option in _SECRET_OPTIONS)
        if skip:
            skip = False
        elif secret:
            skip = not equals
        else:
            kept.append(arg)
    return kept


def session_settings(args: argparse.Namespace) -> Any:
    """The config file's ``[sessions]``; its store replaced by env
    ``VOICE_MEMBRANE_SESSION_STORE``, and that by ``--session-store``."""
    from urllib.parse import urlsplit

    from ..pipeline.config import ConfigError
    from ..server.serve_config import (
        STORE_VARIABLE,
        ServeConfig,
        check_store,
        load_serve_config,
    )

    try:
        config = ServeConfig() if args.config is None else load_serve_config(args.config)
    except ConfigError as exc:
        sys.exit(f"voice-membrane serve: {one_line(exc)}")
    sessions = config.sessions
    for where, given in (
        (STORE_VARIABLE, os.environ.get(STORE_VARIABLE) or None),
        ("--session-store", args.session_store),
    ):
        if given is None:
            continue
        try:
            store = check_store(given)
        except ValueError as exc:
            sys.exit(f"voice-membrane serve: {where}: {exc}")
        sessions = sessions.model_copy(update={"store": store})
    shown = None if args.session_store is None else urlsplit(args.session_store)
    if shown is not None and (shown.password or "password=" in shown.query):
        print(
            "voice-membrane serve: warning: --session-store shows the store's password to "
            f"every user of this machine (ps, /proc); set {STORE_VARIABLE} instead",
            file=sys.stderr,
            flush=True,
        )
    return sessions
