"""``examples/webrtc_client.py`` as a user runs it: its typed question answered
over WebRTC, the events printed, the answer's audio saved."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import soundfile as sf
from webrtc_helpers import ROOT, loopback_ice, server

pytestmark = pytest.mark.anyio
# The example with its ICE on loopback only, as the in-process server's
# (``loopback_ice``): no packet leaves the machine's lo.
RUN_ON_LOOPBACK = """
import runpy, sys
import aioice.ice
aioice.ice.get_host_addresses = lambda *args, **kwargs: ["127.0.0.1"]
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

__all__ = ["loopback_ice"]


@pytest.mark.usefixtures("loopback_ice")
async def test_the_example_client_has_its_question_answered(tmp_path: Path) -> None:
    logs: list[tuple[str, dict[str, Any]]] = []
    out = tmp_path / "answer.wav"
    example = ROOT / "examples" / "webrtc_client.py"
    question = ["--text", "What is the weather?", "--out", str(out)]
    async with server(tmp_path, logs) as running:
        with anyio.fail_after(120):
            done = await anyio.run_process(
                [sys.executable, "-c", RUN_ON_LOOPBACK, str(example), running.url, *question],
                check=False,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert events[0]["type"] == "session.started"
    (end,) = [e for e in events if e["type"] == "turn.end"]
    assert end["heard"] and not end["interrupted"]
    audio, rate = sf.read(out, dtype="int16")
    assert len(audio) / rate > 0.5 and abs(audio).max() > 1000  # the answer, spoken
    assert f"saved {len(audio) / rate:.1f} s of audio to {out}" in stdout
