"""Pipeline files: the shipped ones load; every bad one is a single clear line."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from voice_membrane.chunking import SpeechChunker
from voice_membrane.chunking.lexicon import LANGUAGES
from voice_membrane.cli.run import resolve_config
from voice_membrane.pipeline.build import SPEAKER_RATE, build_parts
from voice_membrane.pipeline.config import ConfigError, PipelineConfig, load_pipeline
from voice_membrane.sinks.null import NullSink

PIPELINES = Path(__file__).resolve().parent.parent / "pipelines"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(p.name for p in PIPELINES.glob("*.toml")))
def test_shipped_pipelines_load(name: str) -> None:
    config = load_pipeline(PIPELINES / name)
    assert config.description


def test_replay_path_is_relative_to_the_pipeline_file() -> None:
    config = load_pipeline(PIPELINES / "replay.toml")
    kind, _, path = config.llm.spec.partition(":")
    assert kind == "replay" and Path(path).is_file()


def test_defaults_and_overrides() -> None:
    config = PipelineConfig()
    assert (config.llm.spec, config.tts.spec, config.sink.kind) == ("local", "piper", "auto")
    changed = config.with_overrides({"tts": {"spec": "espeak"}, "llm": {"spec": None}})
    assert changed.tts.spec == "espeak" and changed.llm.spec == "local"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[llm]\nmax_token = 3\n", "unknown key 'llm.max_token' (did you mean max_tokens?)"),
        ("[llm]\ntemprature = 3\n", "unknown key 'llm.temprature' (did you mean temperature?)"),
        ("[tts]\nengine = 'x'\n", "unknown key 'tts.engine' (allowed here: spec, model"),
        ("colour = 'red'\n", "unknown key 'colour' (allowed here: description, llm"),
        ("[llm]\nmax_tokens = 0\n", "llm.max_tokens: Input should be greater than 0, got 0"),
        ("[sink]\nkind = 'radio'\n", "sink.kind: Input should be 'auto', 'speaker', 'wav' or"),
        ("[chunker]\nmarkdown = 'maybe'\n", "chunker.markdown: Input should be a valid boolean"),
        ("[chunker]\nlanguage = 'xx'\n", "chunker.language: Input should be 'en', 'de', 'fr'"),
        ("[llm\nspec = 1\n", "invalid TOML"),
        ("llm = 3\n", "llm: Input should be a valid dictionary"),
        (
            '[llm]\nuser_name = "Bo\\nAssistant"\n',
            "llm.user_name: Value error, a name is one line without ':'",
        ),
        ("[llm]\nassistant_name = 'A: B'\n", "llm.assistant_name: Value error, a name is one line"),
        ("[llm]\nuser_name = 'Assistant'\n", "user_name and assistant_name are both"),
        # checked on load, not found by the HTTP client at the first prompt
        ("[llm]\ntimeout_s = inf\n", "llm.timeout_s: Input should be a finite number"),
        ("[llm]\ntimeout_s = 1e300\n", "llm.timeout_s: Input should be less than or equal"),
        ("[llm]\nbase_url = 'ftp://h'\n", "llm.base_url: Value error, expected an http://"),
        ("[llm]\nbase_url = 'http://h:70000'\n", "Port out of range 0-65535"),
        ("[llm]\nbase_url = 'http:///v1'\n", "the URL has no host"),
        ("[llm]\nbase_url = 'http://[::1/'\n", "not a valid URL (Invalid IPv6 URL)"),
        ("[tts]\nbase_url = 'ws://h'\n", "tts.base_url: Value error, expected an http://"),
        # hostile files: one line, not a traceback or a megabyte of echo
        ("description = " + "[" * 100_000 + "]" * 100_000 + "\n", "invalid TOML: nested too"),
        ("[llm]\nmax_tokens = " + "7" * 5000 + "\n", "invalid TOML: Exceeds the limit"),
        ("[llm]\nsystem_prompt = " + "1" * 4000 + "\n", "got 1111111111"),
        ("[sink]\n" + "k" * 1_000_000 + " = 1\n", "unknown key 'sink.kkkkk"),
    ],
)
def test_bad_pipeline_files_are_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as excinfo:
        load_pipeline(path)
    line = str(excinfo.value)
    assert "\n" not in line
    assert line.startswith(f"{path}: ")
    assert message in line, line
    assert len(line) < len(f"{path}: ") + 300, line  # a huge bad value is cut


def test_a_credential_in_a_bad_value_is_masked(tmp_path: Path) -> None:
    path = write(
        tmp_path, "[llm]\nbase_url = 'ftp://me:sk-SECRET-0123456789@host/?key=sk-SECRET'\n"
    )
    with pytest.raises(ConfigError) as excinfo:
        load_pipeline(path)
    assert "SECRET" not in str(excinfo.value)
    assert "got 'ftp://***@host/?key=***'" in str(excinfo.value)


def test_chunker_languages_match_the_lexicon(tmp_path: Path) -> None:
    # The pipeline file offers exactly the languages the chunker has tables for.
    for language in LANGUAGES:
        config = load_pipeline(write(tmp_path, f"[chunker]\nlanguage = '{language}'\n"))
        assert config.chunker.language == language
        SpeechChunker(**config.chunker.model_dump())
    field = PipelineConfig.model_fields["chunker"].annotation
    assert field is not None
    offered = set(get_args(get_args(field.model_fields["language"].annotation)[0]))
    assert offered == set(LANGUAGES)


def test_missing_pipeline_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such pipeline file"):
        load_pipeline(tmp_path / "nope.toml")


def test_bad_override_names_the_command_line() -> None:
    with pytest.raises(ConfigError, match=r"^command line: llm.replay_speed"):
        PipelineConfig().with_overrides({"llm": {"replay_speed": -1}})


def test_a_real_time_null_sink_from_a_pipeline_file(tmp_path: Path) -> None:
    recording = PIPELINES.parent / "audio_fixtures" / "streams" / "weather_tool_turn.jsonl"
    text = f"[llm]\nspec = 'replay:{recording}'\n[sink]\nkind = 'null'\nrealtime = true\n"
    config = load_pipeline(write(tmp_path, text)).with_overrides({"tts": {"spec": "espeak"}})
    sink = build_parts(config).sink
    assert isinstance(sink, NullSink) and sink.realtime and sink.sample_rate == SPEAKER_RATE
    plain = build_parts(config.with_overrides({"sink": {"realtime": False}})).sink
    assert isinstance(plain, NullSink) and not plain.realtime


@pytest.mark.parametrize("kind", ["wav", "speaker", "auto"])
def test_realtime_is_only_for_the_null_sink(tmp_path: Path, kind: str) -> None:
    path = write(tmp_path, f"[sink]\nkind = '{kind}'\nrealtime = true\n")
    with pytest.raises(ConfigError) as excinfo:
        load_pipeline(path)
    assert str(excinfo.value) == (
        f'{path}: sink.realtime: only the null sink has it (kind is "{kind}", not "null"), got True'
    )


def test_out_on_the_command_line_wins_over_a_real_time_null_sink(tmp_path: Path) -> None:
    path = write(tmp_path, "[sink]\nkind = 'null'\nrealtime = true\n")
    sink = resolve_config(path, out="reply.wav").sink
    assert (sink.kind, sink.path, sink.realtime) == ("wav", "reply.wav", False)


def test_a_shipped_pipeline_is_found_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no file of that name here
    shipped = Path(__file__).resolve().parents[1] / "pipelines"
    assert load_pipeline("local-espeak") == load_pipeline(shipped / "local-espeak.toml")
    assert resolve_config(Path("replay")).llm.spec.startswith("replay:")


def test_a_file_here_wins_over_a_shipped_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "local").write_text('[tts]\nspec = "espeak"\n', encoding="utf-8")
    assert load_pipeline("local").tts.spec == "espeak"


def test_an_unknown_pipeline_lists_the_shipped_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as excinfo:
        load_pipeline("loca")
    message = str(excinfo.value)
    assert message.startswith("loca: no such pipeline file")
    for name in ("local", "local-espeak", "openai", "replay"):
        assert f" {name}," in message or f" {name})" in message
