"""What the commands share: the token option, tracing, and the boundary where a
user's mistake becomes one line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from ..infra.exception_groups import leaves
from ..providers.replay import RecordingError

TOKEN_VARIABLE = "VOICE_MEMBRANE_TOKEN"


def add_otel(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--otel",
        action="store_true",
        help="send each turn's trace to an OTLP/HTTP collector, configured by the "
        "OTEL_* variables (needs the otel extra; docs/telemetry.md)",
    )


def start_tracing(command: str, args: argparse.Namespace) -> Callable[[], None]:
    """``--otel``: the tracer provider's shutdown (it flushes); a no-op without it."""
    if not args.otel:
        return lambda: None
    from ..telemetry.setup import TelemetryError, setup_tracing

    try:
        return setup_tracing()
    except TelemetryError as exc:
        sys.exit(f"voice-membrane {command}: {exc}")


def token_option(given: str | None, command: str) -> str | None:
    """``--token``, else ``$VOICE_MEMBRANE_TOKEN``. One given on the command line is
    in every user's ``ps``: say so, once, on stderr."""
    import os

    if given is None:
        return os.environ.get(TOKEN_VARIABLE)
    print(
        f"voice-membrane {command}: warning: --token shows the token to every user of "
        f"this machine (ps, /proc); set {TOKEN_VARIABLE} instead",
        file=sys.stderr,
        flush=True,
    )
    return given


def default_pipeline() -> Path:
    from ..pipeline.config import DEFAULT_PIPELINE  # loaded when used: --help stays fast

    return DEFAULT_PIPELINE


def exit_if_user_error(command: str, exc: Exception) -> None:
    """The boundary: what a user can cause (configuration, a model or voice that
    will not load, a device, a file) exits with one line; anything else is a bug
    and the caller re-raises it with its traceback."""
    causes = leaves(exc)
    if all(isinstance(cause, _user_errors()) for cause in causes):
        sys.exit(f"voice-membrane {command}: {'; '.join(one_line(c) for c in causes)}")


def _user_errors() -> tuple[type[Exception], ...]:
    from ..membrane.tools_mcp import McpServerError
    from ..pipeline.config import ConfigError
    from ..sinks.base import SinkError
    from ..tts.base import TtsError
    from ..vendors.errors import LlmError

    return (ConfigError, LlmError, TtsError, SinkError, McpServerError, RecordingError, OSError)


def one_line(exc: BaseException) -> str:
    from ..infra.redact import redact

    text = str(exc) if not isinstance(exc, OSError) or not exc.strerror else _os_error(exc)
    return redact(" ".join(text.split()) or type(exc).__name__)


def _os_error(exc: OSError) -> str:
    """``[Errno 2] No such file or directory: 'x'`` as ``x: No such file or directory``."""
    return f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc.strerror)


def is_utf8(text: str) -> bool:
    """False for text with bytes that were not UTF-8 (decoded as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
