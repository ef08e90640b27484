"""`voice-membrane bench`: the command end to end on the fake servers (``--scripted``
and a pipeline file pointed at them), the prompts file, a missing key, and C
sessions at once. No timing is asserted: only that every figure is there."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from voice_membrane.bench import command
from voice_membrane.bench.command import BenchOptions, bench_prompts
from voice_membrane.bench.prompts import DEFAULT_PROMPTS, load_prompts
from voice_membrane.bench.runner import Target, TargetRun, TurnSample, merge_runs, run_target
from voice_membrane.bench.scripted import scripted_targets
from voice_membrane.bench.scripted_script import REPLY as SCRIPTED_REPLY
from voice_membrane.cli.main import main
from voice_membrane.pipeline.metrics import TurnMetrics
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.fake_openai_speech import FakeOpenAISpeech
from voice_membrane.testing.script import ScriptedReply

REPLY = "Sure. Paris is mild in April, with some rain and cool evenings."


def test_scripted_run_writes_every_turn_and_a_finite_excess(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    main(["bench", "--scripted", "--turns", "3", "--warmup", "1", "--json", str(out)])
    data = json.loads(out.read_text())
    summaries = data["summary"]
    assert [s["label"] for s in summaries] == [
        "scripted: OpenAI speech (a piece at a time)",
        "scripted: ElevenLabs socket (streaming input)",
    ]
    for summary in summaries:
        assert summary["error"] is None
        assert summary["counted"] == 3
        assert len(summary["tts_alone_ms"]) == 3
        for name in ("first_audio", "llm_share", "tts_ttfb", "pipeline_added", "excess"):
            assert all(math.isfinite(v) for v in summary["figures_ms"][name].values())
    turns = data["turns"]
    assert len(turns) == 2 * (3 + 1)
    counted = [t for t in turns if t["counted"]]
    assert len(counted) == 6 and all(not t["warm_up"] for t in counted)
    for turn in counted:
        assert math.isfinite(turn["excess_ms"])
        assert turn["report"]["stamps_ms"]["first_audio"] is not None
        assert SCRIPTED_REPLY.startswith(turn["first_piece"].strip())
    for summary in summaries:
        assert summary["gaps"] == {"turns": 0, "gaps": 0, "ms": 0}  # the fakes keep ahead
        assert summary["open_s"] > 0
    assert sum(t["warm_up"] for t in turns) == 2
    shown = capsys.readouterr().out
    assert shown.count("| excess over the ideal ") == 2  # a table per target
    assert "p50 |" in shown and "3 turns counted of 3" in shown
    assert "first audio p50" not in shown  # no progress bar: stdout is not a terminal


def _pipeline(tmp_path: Path, chat: FakeOpenAI, speech: FakeOpenAISpeech) -> Path:
    path = tmp_path / "fakes.toml"
    path.write_text(
        f'[llm]\nspec = "openai:gpt-test"\nbase_url = "{chat.base_url}"\n\n'
        f'[tts]\nspec = "openai:alloy"\nbase_url = "{speech.base_url}"\n\n'
        '[sink]\nkind = "null"\n'
    )
    return path


def test_a_missing_key_is_named_and_the_rest_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("ELEVENLABS_API_KEY", raising=False)
    out = tmp_path / "bench.json"
    reply = ScriptedReply.of(REPLY, delta_chars=6)
    with FakeOpenAI(*[reply] * 20) as chat, FakeOpenAISpeech() as speech:
        pipeline = _pipeline(tmp_path, chat, speech)
        main(
            [
                "bench",
                "--pipeline",
                str(pipeline),
                "--tts",
                "elevenlabs:fake-voice",
                "--tts",
                "openai:alloy",
                "--turns",
                "2",
                "--json",
                str(out),
            ]
        )
    shown = capsys.readouterr().out
    missing = next(line for line in shown.splitlines() if "not measured" in line)
    assert missing.startswith("fakes tts=elevenlabs:fake-voice: not measured:")
    assert "ELEVENLABS_API_KEY" in missing
    summaries = {s["label"]: s for s in json.loads(out.read_text())["summary"]}
    assert summaries["fakes tts=elevenlabs:fake-voice"]["counted"] == 0
    measured = summaries["fakes tts=openai:alloy"]
    assert measured["error"] is None and measured["counted"] == 2
    assert measured["figures_ms"]["excess"] is not None
    assert "fakes tts=openai:alloy (openai → " in shown and "| first audio " in shown


def test_a_terminal_shows_the_progress_bar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=120)
    monkeypatch.setattr(command, "console", lambda: terminal)
    reply = ScriptedReply.of(REPLY, delta_chars=6)
    with FakeOpenAI(*[reply] * 5) as chat, FakeOpenAISpeech() as speech:
        pipeline = _pipeline(tmp_path, chat, speech)
        main(["bench", "--pipeline", str(pipeline), "--turns", "2"])
    shown = screen.getvalue()
    assert "first audio p50" in shown and "2/2" in shown
    assert "excess over the ideal" in shown


def test_nothing_measured_exits_with_each_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ELEVENLABS_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeOpenAI() as chat, FakeOpenAISpeech() as speech:
        pipeline = _pipeline(tmp_path, chat, speech)
        with pytest.raises(SystemExit) as exited:
            main(["bench", "--pipeline", str(pipeline), "--tts", "elevenlabs:v", "--turns", "1"])
    assert exited.value.code == 1
    assert "ELEVENLABS_API_KEY" in capsys.readouterr().out


def test_a_bad_prompts_file_is_one_line(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "Hello?"}\n{"prompt": \n')
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--scripted", "--prompts", str(prompts), "--turns", "1"])
    message = str(exited.value.code)
    assert message.startswith(f"voice-membrane bench: --prompts {prompts}: line 2 is not JSON")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "no prompt in the file"),
        ('{"text": "Hi"}\n', 'line 1 has no "prompt" string'),
        (b"\xff\xfe", "not UTF-8 text"),
    ],
)
def test_prompts_file_problems(tmp_path: Path, content: str | bytes, problem: str) -> None:
    path = tmp_path / "p.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ValueError, match=problem):
        load_prompts(path)


def test_prompts_from_text_and_jsonl(tmp_path: Path) -> None:
    text, jsonl = tmp_path / "p.txt", tmp_path / "p.jsonl"
    text.write_text("How far is the moon?\n\n  Tell me a joke.  \n")
    jsonl.write_text('{"prompt": "How far is the moon?"}\n{"prompt": "Tell me a joke."}\n')
    assert load_prompts(text) == load_prompts(jsonl) == ["How far is the moon?", "Tell me a joke."]
    assert bench_prompts(BenchOptions()) == list(DEFAULT_PROMPTS)
    with pytest.raises(ValueError, match="No such file or directory"):
        load_prompts(tmp_path / "missing.txt")


def test_concurrency_runs_c_sessions_at_once() -> None:
    async def go() -> None:
        with scripted_targets() as targets, anyio.fail_after(120):
            run = await run_target(
                targets[0],
                list(DEFAULT_PROMPTS),
                turns=4,
                warmup=1,
                concurrency=2,
                warm_up_prompt="Hi",
                alone_each_turn=True,
            )
        assert run.error is None and run.sessions == 2
        assert sorted(t.session for t in run.warm_ups) == [0, 1]
        assert sorted(t.session for t in run.turns) == [0, 0, 1, 1]
        assert [t.prompt for t in run.turns if t.session == 0] == [
            DEFAULT_PROMPTS[0],
            DEFAULT_PROMPTS[2],
        ]
        assert [t.prompt for t in run.turns if t.session == 1] == [
            DEFAULT_PROMPTS[1],
            DEFAULT_PROMPTS[3],
        ]
        assert len(run.counted) == 4
        # The first text each turn handed to the engine: the reply's first words.
        pieces = {turn.first_piece for turn in run.turns}
        assert len(pieces) == 1
        (piece,) = pieces
        assert piece is not None and piece.strip()
        assert SCRIPTED_REPLY.split()[: len(piece.split())] == piece.split()
        # Each turn's own first piece, spoken alone after the turns: its ideal uses it.
        for turn in run.turns:
            assert turn.tts_alone_ms is not None and turn.tts_alone_ms > 0
            assert run.figures(turn)["tts_alone"] == turn.tts_alone_ms

    anyio.run(go)


def test_runs_made_one_after_another_merge_into_one() -> None:
    def sample(prompt: str, warm_up: bool = False) -> TurnSample:
        return TurnSample(prompt, 0, warm_up, None, None, first_piece=prompt)

    targets = [Target("t", None), Target("t", None)]
    first = TargetRun(targets[0], "llm", "tts", sessions=1, open_s=2.0)
    first.turns = [sample("a"), sample("b")]
    first.warm_ups = [sample("hi", True)]
    first.tts_alone_ms = [10.0, 30.0]
    second = TargetRun(targets[1], "llm", "tts", sessions=1, open_s=0.5, error="late")
    second.turns = [sample("c")]
    second.warm_ups = [sample("hi", True)]
    second.tts_alone_ms = [20.0]
    merged = merge_runs([first, second])
    assert merged.target is targets[0] and (merged.llm, merged.tts) == ("llm", "tts")
    assert merged.sessions == 2 and merged.open_s == 2.0 and merged.error == "late"
    assert [(t.prompt, t.session) for t in merged.turns] == [("a", 0), ("b", 0), ("c", 1)]
    assert [t.session for t in merged.warm_ups] == [0, 1]
    assert merged.tts_alone_ms == [10.0, 30.0, 20.0] and merged.tts_alone == 20.0


def test_the_ideal_starts_from_the_measured_first_token() -> None:
    metrics = TurnMetrics(started_ns=0)
    metrics.stamp("first_token", 106_000_000)  # the script said 100 ms: 6 ms of transport
    metrics.first_chunk_token_ns = 131_000_000
    report = metrics.report(llm="l", tts="t", sink="s")
    turn = TurnSample("q", 0, False, report, None)
    scripted = TargetRun(Target("s", None, llm_after_first_token_ms=20.0), tts_alone_ms=[80.0])
    # First token + the script's deltas to the first piece + the engine alone.
    assert scripted.ideal_ms(turn) == 206.0
    real = TargetRun(Target("r", None), tts_alone_ms=[80.0])
    assert real.ideal_ms(turn) == 211.0  # the releasing delta's own arrival + alone


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--turns", "0"], "--turns must be ≥ 1"),
        (["--concurrency", "0"], "--concurrency must be ≥ 1"),
        (["--scripted", "--tts", "espeak"], "--scripted brings its own pipelines"),
    ],
)
def test_bad_options_are_one_line(args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", *args])
    assert str(exited.value.code).startswith(f"voice-membrane bench: {message}")
