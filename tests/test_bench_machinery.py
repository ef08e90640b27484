"""The helpers the measurements of ``voice_membrane.bench`` share: the fakes'
process, the first-piece delta of a scripted reply, the serve load's ideal, the
load client's result line, environment variables set for a while, a process's
/proc figures. The measurements themselves run in tests/test_benchmarks.py."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path

import anyio
import httpx
import pytest

from voice_membrane.bench.child import library_env
from voice_membrane.bench.clients import run_sessions
from voice_membrane.bench.environ import variables
from voice_membrane.bench.fakes import fakes_process
from voice_membrane.bench.load_client import ClientResult, TurnRecord, read_result
from voice_membrane.bench.scripted import first_piece_delta
from voice_membrane.bench.serve_load import LoadScript, ideal_first_audio, pipeline_toml
from voice_membrane.bench.serve_process import cpu_s, rss_mb
from voice_membrane.bench.tts_overhead import tts_fakes
from voice_membrane.chunking import SpeechChunker
from voice_membrane.pipeline.config import ChunkerConfig, load_pipeline
from voice_membrane.testing.script import ScriptedReply

REPLY = "Sure, the weather stays mild and dry today, with a light breeze."


def _deltas(text: str, delta_chars: int) -> list[str]:
    return list(ScriptedReply.of(text, delta_chars=delta_chars).pieces(text))


def test_first_piece_delta_is_the_first_delta_that_releases_a_piece() -> None:
    chunker = ChunkerConfig()
    index, piece = first_piece_delta(chunker, REPLY, 4)
    deltas = _deltas(REPLY, 4)
    assert 0 < index < len(deltas) - 1  # released before the end, not by the flush
    before = SpeechChunker(**chunker.model_dump())
    assert not any(before.feed(delta) for delta in deltas[:index])  # none earlier
    assert piece.strip() and piece.strip() in "".join(deltas[: index + 1])


def test_first_piece_delta_without_a_piece_before_the_end_is_the_flush() -> None:
    index, piece = first_piece_delta(ChunkerConfig(), "Hi", 1)
    assert (index, piece.strip()) == (1, "Hi")


def test_serve_load_ideal_adds_the_scripted_waits(tmp_path: Path) -> None:
    pipeline = tmp_path / "load.toml"
    pipeline.write_text(pipeline_toml(), encoding="utf-8")
    script = LoadScript(REPLY, 0.3, 0.025, 4, 0.1, 0.8)
    ideal = ideal_first_audio(script, pipeline)
    index, piece = first_piece_delta(load_pipeline(pipeline).chunker, REPLY, 4)
    assert (ideal.first_piece, ideal.deltas) == (piece, index + 1)
    assert ideal.first_audio_ms == pytest.approx(300 + index * 25 + 100)


def test_a_client_result_comes_back_from_its_json_line() -> None:
    turn = TurnRecord(2, 412.5, 1, 30.0, 40, 3.2, ["lost 1 frame(s)"], {"first_audio": 400.0})
    result = ClientResult([turn, TurnRecord(3)], ["closed 1011"], [0.4, 1.2], 0.8, 9.5)
    assert read_result(json.dumps(asdict(result))) == result


def test_variables_are_set_for_the_block_and_then_as_they_were(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VM_BENCH_SET", "before")
    monkeypatch.delenv("VM_BENCH_UNSET", raising=False)
    with variables(VM_BENCH_SET="during", VM_BENCH_UNSET="during"):
        assert os.environ["VM_BENCH_SET"] == os.environ["VM_BENCH_UNSET"] == "during"
    assert os.environ["VM_BENCH_SET"] == "before"
    assert "VM_BENCH_UNSET" not in os.environ


def test_helpers_import_this_voice_membrane() -> None:
    root = str(Path(__file__).resolve().parent.parent)
    assert (
        library_env({"PYTHONPATH": "/elsewhere"})["PYTHONPATH"] == f"{root}{os.pathsep}/elsewhere"
    )


def test_a_recipes_fakes_serve_from_their_own_process() -> None:
    with fakes_process(tts_fakes, {"ttfb_s": 0.0}) as fakes:
        urls = fakes.urls()
        assert sorted(urls) == ["elevenlabs", "openai"]
        assert fakes.pid != os.getpid() and cpu_s(fakes.pid) > 0
        # The speech fake refuses a request without its key: it is up and answering.
        response = httpx.post(f"{urls['openai']}/audio/speech", json={}, timeout=10)
        assert response.status_code == 401


def test_a_recipe_the_child_cannot_import_is_refused() -> None:
    def recipe(args: object) -> dict[str, object]:
        return {}

    recipe.__module__ = "__main__"
    with pytest.raises(ValueError, match="importable module"), fakes_process(recipe):  # type: ignore[arg-type]
        pass


def test_proc_figures_of_a_running_process() -> None:
    assert cpu_s(os.getpid()) > 0
    assert rss_mb(os.getpid()) > 10


class _Timed:
    """A session whose turns take ``run_s``; when it closed, on the shared log."""

    def __init__(self, name: str, run_s: float, log: list[str]) -> None:
        self.name, self.run_s, self.log = name, run_s, log

    @contextlib.asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        yield
        self.log.append(f"{self.name} closed")

    async def run(self, delay: float) -> None:
        await anyio.sleep(self.run_s)
        self.log.append(f"{self.name} ran")


@pytest.mark.parametrize("hold", [True, False])
def test_held_sessions_close_only_once_every_sessions_turns_are_done(hold: bool) -> None:
    log: list[str] = []
    result: ClientResult[object] = ClientResult()

    async def go() -> None:
        pass

    sessions = [_Timed("short", 0.0, log), _Timed("long", 0.2, log)]
    anyio.run(lambda: run_sessions(sessions, 0.0, 1, result, go, lag=False, hold=hold))
    if hold:  # the load: N sessions open to the end, the closes outside the figures
        assert log == ["short ran", "long ran", "short closed", "long closed"]
    else:  # the voice callers: a call hangs up when its questions are done
        assert log == ["short ran", "short closed", "long ran", "long closed"]
    assert result.wall_s >= 0.2 and result.cpu_s >= 0
