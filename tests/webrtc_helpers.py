"""Helpers for the WebRTC tests: ICE on loopback only, a listening server, and
the process's UDP sockets (what a closed peer must give back)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from serve_voice_helpers import listening_pipelines

from voice_membrane.server import Server
from voice_membrane.vocab.audio import Samples

ROOT = Path(__file__).resolve().parent.parent
QUESTION = ROOT / "audio_fixtures" / "speech" / "questions" / "weather_paris.wav"


@pytest.fixture
def loopback_ice(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Host candidates on 127.0.0.1 only (aioice leaves loopback out), for both
    the server and the client of a test: no packet leaves the machine's lo."""
    import aioice.ice

    monkeypatch.setattr(aioice.ice, "get_host_addresses", lambda *_, **__: ["127.0.0.1"])
    yield


def server(folder: Path, logs: list[tuple[str, dict[str, Any]]], **options: Any) -> Server:
    def log(kind: str, **fields: Any) -> None:
        logs.append((kind, fields))

    return Server(listening_pipelines(folder), port=0, log=log, webrtc=True, **options)


def question() -> tuple[Samples, int]:
    samples, rate = sf.read(QUESTION, dtype="int16")
    return np.asarray(samples, dtype=np.int16), int(rate)


def rms(samples: Samples) -> float:
    return float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) if len(samples) else 0.0


def udp_sockets() -> int:
    """The UDP sockets this process holds open (IPv4 and IPv6)."""
    inodes = set()
    for name in ("udp", "udp6"):
        with open(f"/proc/self/net/{name}") as table:
            inodes |= {line.split()[9] for line in list(table)[1:]}
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            held += 1
    return held


def kinds(logs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [kind for kind, _ in logs]
