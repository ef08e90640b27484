"""A turn that says nothing does not pass silently (issue 24): run says so in one
line and ``run --prompt`` exits 3 — but not for a reply that was only a tool
call; and the embedded model refuses a prefill formatter before it loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voice_membrane.cli.main import main
from voice_membrane.cli.run import NO_SPEECH_EXIT
from voice_membrane.pipeline.config import ConfigError, load_pipeline


def recording(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "r.jsonl"
    lines = [{"format": "voice-membrane-replay", "version": 1, "mode": "prefill"}]
    lines.append({"t_ms": 0, "text": text})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def run(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[object, str]:
    args = ["run", "--llm", f"replay:{recording(tmp_path, text)}", "--tts", "espeak"]
    args += ["--out", str(tmp_path / "o.wav"), "--prompt", "hi"]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
        raise SystemExit(0)
    return exit_info.value.code, capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("<thinking>nothing to say</thinking>", "no speech: the reply had nothing to say"),
        ("🎉🎉", "no speech: nothing in the reply's text could be said aloud"),
    ],
)
def test_a_turn_that_said_nothing_is_one_line_and_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: str
) -> None:
    code, out = run(tmp_path, text, capsys)
    assert code == NO_SPEECH_EXIT == 3
    assert out.count("no speech") == 1 and line in out


def test_a_turn_that_spoke_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, "Hello there, nice to meet you.", capsys)
    assert code == 0 and "no speech" not in out


def test_a_reply_that_was_only_a_tool_call_is_not_called_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = (
        '<function_calls><invoke name="get_weather"><parameter name="city">Paris'
        "</parameter></invoke></function_calls>"
    )
    code, out = run(tmp_path, call, capsys)
    assert "no speech" not in out and code == 0


@pytest.mark.parametrize("formatter", ["chatml", "anthropic-xml", "completions"])
def test_the_embedded_model_refuses_a_prefill_formatter_in_one_line(
    tmp_path: Path, formatter: str
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(f'[llm]\nspec = "local"\nformatter = "{formatter}"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_pipeline(path)
    message = str(error.value)
    assert "\n" not in message
    assert f"formatter {formatter} does not work with the embedded model" in message
    assert "use formatter native" in message


def test_the_flag_is_refused_before_the_model_loads(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import voice_membrane.providers.local_llama as local_llama

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(local_llama, "load_model", never)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--formatter", "chatml", "--prompt", "hi"])
    assert "does not work with the embedded model" in str(exit_info.value.code)


def test_a_recording_may_still_use_a_prefill_formatter(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        f'[llm]\nspec = "replay:{recording(tmp_path, "Hi.")}"\nformatter = "chatml"\n',
        encoding="utf-8",
    )
    assert load_pipeline(path).llm.formatter == "chatml"
