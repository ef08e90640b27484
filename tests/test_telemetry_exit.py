"""``--otel`` with no collector listening: no exporter noise in the transcript,
one line about it on stderr, and an exit that does not wait out the retries."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

from voice_membrane.telemetry.setup import EXPORT_LOGGERS, _route_export_warnings, _SaidOnce

REPO = Path(__file__).resolve().parent.parent
RECORDING = REPO / "audio_fixtures" / "streams" / "weather_tool_turn.jsonl"
# The old exit waited out the exporter's retries (about 30 s with this timeout):
# a deadline it would fail, generous for a loaded machine.
DEADLINE_S = 20


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the with ends: nothing listens


def test_run_otel_with_no_collector_keeps_the_transcript_clean_and_exits(tmp_path: Path) -> None:
    pipeline = tmp_path / "fast.toml"
    pipeline.write_text(
        f'[llm]\nspec = "replay:{RECORDING}"\nreplay_speed = 0\n'
        '[tts]\nspec = "espeak"\n[sink]\nkind = "null"\n',
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://user:pw@127.0.0.1:{_closed_port()}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "60",  # a patient exporter: the exit must not be
    }
    command = [sys.executable, "-m", "voice_membrane.cli", "run", "--pipeline", str(pipeline)]
    done = subprocess.run(
        [*command, "--prompt", "Weather?", "--otel"],
        capture_output=True,
        text=True,
        env=env,
        timeout=DEADLINE_S,
    )
    assert done.returncode == 0, done.stderr
    assert "Have a lovely day!" in done.stdout  # the turn was spoken whole
    for noise in ("Transient error", "exporting", "retrying in", "HTTPConnection", "telemetry"):
        assert noise not in done.stdout
    lines = done.stderr.splitlines()
    assert lines == [
        f"voice-membrane: telemetry: cannot reach the collector at "
        f"http://127.0.0.1:{env['OTEL_EXPORTER_OTLP_ENDPOINT'].rsplit(':', 1)[1]}/v1/traces "
        "(spans dropped)"
    ], done.stderr


def test_a_refusing_collector_is_said_once_with_its_status() -> None:
    said: list[str] = []
    handler = _SaidOnce("http://collector:4318/v1/traces", said.append)
    _route_export_warnings(handler)
    try:
        logger = logging.getLogger(EXPORT_LOGGERS[0] + ".otlp.proto.http.trace_exporter")
        for _ in range(3):
            logger.error("Failed to export %s batch code: %s, reason: %s", "spans", 401, "no")
    finally:
        for name in EXPORT_LOGGERS:
            logging.getLogger(name).removeHandler(handler)
            logging.getLogger(name).propagate = True
    assert said == [
        "telemetry: the collector at http://collector:4318/v1/traces refused the spans "
        "(HTTP 401) (spans dropped)"
    ]
