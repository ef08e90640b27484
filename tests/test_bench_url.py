"""`voice-membrane bench --url`: the command, in a thread, against a `serve` running
in-process on a short replay pipeline. No timing is asserted: the client's first
audio comes after the server's own (it is measured from before the server hears
the message), and every failure is one line."""

from __future__ import annotations

import json
import socket
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.serve_helpers import running_server
from voice_membrane.cli.main import main
from voice_membrane.pipeline.metrics import (
    STAMPS,
    ContextFit,
    LatencyReport,
    PieceMetrics,
    TurnEnd,
    TurnMetrics,
)
from voice_membrane.server import Server
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import ScriptedReply

TOKEN = "s3cret-token"
GUARD_S = 120  # against a hang only; the machine is shared and loaded

pytestmark = pytest.mark.anyio


async def _bench(argv: list[str]) -> int | str | None:
    """The command's exit status (None: it returned)."""
    try:
        with anyio.fail_after(GUARD_S):
            await anyio.to_thread.run_sync(partial(main, ["bench", *argv]), abandon_on_cancel=True)
    except SystemExit as exit_:
        return exit_.code
    return None


async def test_url_measures_each_turn_as_the_client_sees_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "bench.json"
    monkeypatch.setenv("VOICE_MEMBRANE_TOKEN", TOKEN)  # the token from the environment
    async with running_server(tmp_path, token=TOKEN) as server:
        argv = ["--url", server.ws_url, "--pipeline", "short"]
        status = await _bench([*argv, "--turns", "2", "--warmup", "1", "--json", str(out)])
    assert status is None
    data: dict[str, Any] = json.loads(out.read_text())
    [summary] = data["summary"]
    assert summary["error"] is None and summary["counted"] == 2
    assert summary["label"] == f"{server.ws_url} pipeline=short"
    assert summary["llm"].startswith("replay") and summary["tts"]
    for name in ("first_audio", "client_first_audio", "client_minus_server"):
        assert summary["figures_ms"][name] is not None
    turns = data["turns"]
    assert [t["warm_up"] for t in turns] == [True, False, False]
    for turn in turns:
        server_first = turn["report"]["stamps_ms"]["first_audio"]
        assert turn["client_first_audio_ms"] >= server_first
        assert turn["client_minus_server_ms"] == pytest.approx(
            turn["client_first_audio_ms"] - server_first, abs=0.01
        )
    shown = capsys.readouterr()
    assert "| client first audio " in shown.out
    assert "| client - server first audio " in shown.out
    assert "2 turns counted of 2" in shown.out
    assert "excess over the ideal" not in shown.out  # nothing timed alone from a client
    assert TOKEN not in shown.out + shown.err + out.read_text()


async def test_a_wrong_token_is_one_line_naming_4401(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICE_MEMBRANE_TOKEN", raising=False)
    async with running_server(tmp_path, token=TOKEN) as server:
        status = await _bench(["--url", server.ws_url, "--token", "wrong", "--turns", "2"])
    assert status == 1
    _assert_one_line(capsys, "4401", warned=True)


async def test_nothing_listening_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status = await _bench(["--url", f"ws://127.0.0.1:{port}/v1/session", "--turns", "2"])
    assert status == 1
    _assert_one_line(capsys, f"ws://127.0.0.1:{port}/v1/session: not measured:")


async def test_a_pipeline_the_server_does_not_allow_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_server(tmp_path) as server:
        status = await _bench(["--url", server.ws_url, "--pipeline", "nope", "--turns", "2"])
    assert status == 1
    line = _assert_one_line(capsys, "pipeline_not_allowed")
    assert "short" in line and "long" in line  # the names the server allows


async def test_a_full_server_is_one_line_naming_1013(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_server(tmp_path, max_sessions=1) as server:
        argv = ["--url", server.ws_url, "--concurrency", "2", "--turns", "2", "--warmup", "0"]
        status = await _bench(argv)
    assert status == 1
    line = _assert_one_line(capsys, "1013")
    assert "full" in line


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a plain test: no event loop used
def test_url_refuses_llm_and_scripted(anyio_backend: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--url", "ws://127.0.0.1:1/v1/session", "--scripted"])
    assert "--url" in str(exit_.value.code)
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--url", "http://127.0.0.1:1/v1/session"])
    assert "ws://" in str(exit_.value.code)


def _assert_one_line(capsys: pytest.CaptureFixture[str], needle: str, warned: bool = False) -> str:
    """One line, besides (``warned``) the one that says --token is seen in ps."""
    shown = capsys.readouterr()
    text = (shown.out + shown.err).strip()
    if warned:
        warning = "voice-membrane bench: warning: --token shows the token to every user"
        lines = text.splitlines()
        assert sum(line.startswith(warning) for line in lines) == 1, text
        text = "\n".join(line for line in lines if not line.startswith(warning))
    assert "Traceback" not in text
    assert len(text.splitlines()) == 1, text
    assert needle in text and "not measured" in text, text
    assert TOKEN not in text and "wrong" not in text
    return text


async def test_a_turn_error_is_one_line_under_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    failing = ScriptedReply.http_error(400, message="scripted refusal")
    with FakeOpenAI(*[failing] * 10) as chat:
        path = tmp_path / "failing.toml"
        path.write_text(
            f'[llm]\nspec = "openai:gpt-test"\nbase_url = "{chat.base_url}"\n\n'
            '[tts]\nspec = "espeak"\n\n[sink]\nkind = "null"\n'
        )
        async with Server([path], port=0, log=lambda *a, **k: None) as server:
            status = await _bench(["--url", server.ws_url, "--turns", "2", "--warmup", "0"])
    assert status is None  # the target ran: its turns failed
    shown = capsys.readouterr().out
    assert "errors 2" in shown and "| client first audio " in shown
    [line] = [line for line in shown.splitlines() if "turns failed" in line]
    assert "2 of 2 turns failed" in line and "scripted refusal" in line
    assert "Traceback" not in shown and "test-key" not in shown


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a plain test: no event loop used
def test_a_report_survives_its_json(anyio_backend: str) -> None:
    """What a client rebuilds from the metrics event is the server's report."""
    m = TurnMetrics(started_ns=0)
    for at, name in enumerate(STAMPS[1:], start=1):
        m.stamp(name, at * 1_000_000)
    m.first_chunk_token_ns, m.tokens, m.retries = 2_500_000, 7, ["429, waited 1 s"]
    m.context = ContextFit(dropped=1, kept=2, tokens=300, budget=4000, exact=False)
    m.end = TurnEnd("model", barge_in=True, turn_model_ms=12.5)  # why the user's turn ended
    m.pieces.append(
        PieceMetrics(chars=12, sent_ns=4_000_000, first_audio_ns=5_000_000, audio_seconds=0.5)
    )
    report = m.report(llm="replay", tts="espeak", sink="socket")
    assert LatencyReport.from_dict(json.loads(report.to_json())) == report
