"""stt/registry.py: specs, keys and paths checked in one line before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from voice_membrane.stt.pocketsphinx import PocketsphinxStt
from voice_membrane.stt.registry import create_stt


def test_pocketsphinx_is_the_default_and_takes_its_options() -> None:
    assert isinstance(create_stt(), PocketsphinxStt)
    engine = create_stt("pocketsphinx", phrases=["what time is it"])
    assert isinstance(engine, PocketsphinxStt) and engine.phrases == ("what time is it",)
    with pytest.raises(ValueError, match="stt 'pocketsphinx'"):
        create_stt("pocketsphinx", bogus=1)


@pytest.mark.parametrize("spec", ["nope", "deepgram", "openai:", "whisper", "pocketsphinx:x"])
def test_unknown_spec_lists_the_specs(spec: str) -> None:
    with pytest.raises(ValueError, match="use 'pocketsphinx', 'deepgram:MODEL'") as info:
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


def test_whisper_needs_a_model_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no faster-whisper model at") as info:
        create_stt(f"whisper:{tmp_path / 'missing'}")
    assert "\n" not in str(info.value)
    (tmp_path / "model.bin").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="faster-whisper is not installed"):
        create_stt(f"whisper:{tmp_path}")


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
