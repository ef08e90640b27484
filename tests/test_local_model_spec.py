"""Another GGUF model than the shipped SmolLM2: ``--llm local:PATH`` (or ``llm.spec``
in a pipeline file, relative to that file), checked before anything loads."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from voice_membrane.cli.main import main
from voice_membrane.cli.run import run_assistant
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.providers.registry import create_provider

pytest.importorskip("llama_cpp", reason="the local extra (llama-cpp-python) is not installed")

from voice_membrane.providers.local_llama import default_model_path

ROOT = Path(__file__).resolve().parent.parent


def test_a_missing_model_file_is_one_line_before_anything_loads(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(SystemExit) as excinfo:
        main(["run", "--prompt", "hi", "--llm", f"local:{missing}"])
    text = str(excinfo.value)  # (a long path is shortened in the message)
    assert text.startswith("voice-membrane run: llm 'local:/"), text
    assert text.endswith(": no such model file") and "\n" not in text, text


def test_the_spec_names_the_model_file(tmp_path: Path) -> None:
    model = tmp_path / "my-model.gguf"
    model.symlink_to(default_model_path())
    provider, name = create_provider(f"local:{model}", model_path="/elsewhere.gguf")
    assert name == "local"
    assert provider.name == "local:my-model"  # the spec wins over llm.model_path


def test_a_pipeline_file_names_its_model_relative_to_itself(tmp_path: Path) -> None:
    folder = tmp_path / "pipes"
    folder.mkdir()
    shutil.copy(ROOT / "pipelines" / "local-espeak.toml", folder / "mine.toml")
    text = (folder / "mine.toml").read_text().replace('spec = "local"', 'spec = "local:m.gguf"')
    (folder / "mine.toml").write_text(text)
    (folder / "m.gguf").symlink_to(default_model_path())
    config = load_pipeline(folder / "mine.toml")
    assert config.llm.spec == f"local:{(folder / 'm.gguf').resolve()}"

    wav = tmp_path / "a.wav"
    config = config.with_overrides(
        {"llm": {"max_tokens": 24, "temperature": 0.0}, "sink": {"kind": "wav", "path": str(wav)}}
    )
    printed: list[str] = []
    (result,) = anyio.run(lambda: run_assistant(config, prompt="Say hello.", out=printed.append))
    assert result.error is None and result.spoken_text.strip()
    assert wav.stat().st_size > 1000
