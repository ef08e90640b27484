"""``voice-membrane bench --twilio URL``: a running serve's phone route called
by the fake Twilio caller, the question answered and "stop" over the answer
cleared; and a wrong address refused in one line. No timing assertions."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_voice_serve import voice_serve_setup
from voice_membrane.bench.child import library_env
from voice_membrane.bench.serve_process import serve_process
from voice_membrane.bench.voice_serve import voice_fakes

pytest.importorskip("deepgram")
pytest.importorskip("onnxruntime")


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voice_membrane.cli", "bench", *args],
        capture_output=True,
        text=True,
        env=library_env(),
        timeout=180,
    )


def test_a_call_measures_voice_to_voice_and_the_clear_of_a_barge_in(tmp_path: Path) -> None:
    with (
        voice_fakes(voice_serve_setup()) as fakes,
        open(tmp_path / "serve.log", "w+", encoding="utf-8") as log,
        serve_process(fakes.pipeline, fakes.env, log) as (url, _),
    ):
        done = _bench("--twilio", f"{url}/v1/twilio", "--turns", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(
        r"call 1, question 1: voice to voice \d+ ms, barge-in \(onset → clear\) \d+ ms", lines[0]
    ), lines
    assert re.fullmatch(r"voice to voice, ms: p50 \d+ / p95 \d+ / max \d+ over 1", lines[1])
    assert re.fullmatch(
        r"barge-in, onset → clear, ms: p50 \d+ / p95 \d+ / max \d+ over 1", lines[2]
    )


def test_a_wrong_address_is_one_line() -> None:
    done = _bench("--twilio", "http://127.0.0.1:9/v1/twilio")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "voice-membrane bench: --twilio http://127.0.0.1:9/v1/twilio: a ws:// or wss:// "
        "address (…/v1/twilio)"
    ]
