"""Models that ``voice-membrane models pull NAME`` fetches (docs/models.md): a short
list of recommended ones, each pinned to a Hugging Face repo, revision and files,
and the folder they are kept in. Nothing here downloads: ``--llm local:NAME`` and
``--stt whisper:NAME`` only look for what was pulled.

The folder is ``$VOICE_MEMBRANE_MODELS`` if set, else
``$XDG_DATA_HOME/voice-membrane/models`` (``~/.local/share/…``): one plain folder
per model, which the user can see and delete, rather than the hub's shared
cache of blobs and links (which its own tools may clean away)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..infra.redact import quote

MODELS_ENV = "VOICE_MEMBRANE_MODELS"
PARTIAL_SUFFIX = ".incomplete"  # a download in progress (resumed by the next pull)


@dataclass(frozen=True, slots=True)
class HubFile:
    name: str
    # The file's SHA-256, pinned; None where it could not be checked from here:
    # the hub's own checksum (the LFS SHA-256, or the git blob id of a small
    # file) of the pinned revision is taken at download instead.
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class CatalogModel:
    name: str
    kind: Literal["llm", "stt"]
    repo: str
    revision: str  # a commit where one was verified (docs/models.md says which)
    files: tuple[HubFile, ...]
    size_mb: int  # about, as the hub lists it
    good_for: str

    @property
    def spec(self) -> str:
        """How a pipeline names it: ``local:NAME`` or ``whisper:NAME``."""
        return f"{'local' if self.kind == 'llm' else 'whisper'}:{self.name}"


CATALOG: tuple[CatalogModel, ...] = (
    CatalogModel(
        "qwen2.5-0.5b",
        "llm",
        "Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        "main",
        (HubFile("qwen2.5-0.5b-instruct-q4_k_m.gguf"),),
        491,
        "small multilingual chat model (Qwen): answers in the language it is asked in",
    ),
    CatalogModel(
        "qwen2.5-1.5b",
        "llm",
        "Qwen/Qwen2.5-1.5B-Instruct-GGUF",
        "main",
        (HubFile("qwen2.5-1.5b-instruct-q4_k_m.gguf"),),
        1120,
        "more knowledge and steadier follow-ups than 0.5b; about 3x its size, so slower",
    ),
    CatalogModel(
        "smollm2-1.7b",
        "llm",
        "HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF",
        "6a7e79393ef2957e087f11fce1e50476799e313c",
        (HubFile("smollm2-1.7b-instruct-q4_k_m.gguf"),),
        1060,
        "English chat, the embedded SmolLM2's big sibling (same template)",
    ),
    CatalogModel(
        "base.en",
        "stt",
        "Systran/faster-whisper-base.en",
        "3d3d5dee26484f91867d81cb899cfcf72b96be6c",
        tuple(
            HubFile(name)
            for name in ("config.json", "model.bin", "tokenizer.json", "vocabulary.txt")
        ),
        148,
        "Whisper base.en (CTranslate2): more accurate than tiny.en, slower to decode",
    ),
)


def find(name: str) -> CatalogModel | None:
    return next((model for model in CATALOG if model.name == name), None)


def names(kind: str | None = None) -> list[str]:
    return [model.name for model in CATALOG if kind is None or model.kind == kind]


def models_dir() -> Path:
    """Where pulled models are kept (the module's docstring)."""
    if os.environ.get(MODELS_ENV):
        return Path(os.environ[MODELS_ENV]).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).expanduser() / "voice-membrane" / "models"


def model_folder(model: CatalogModel) -> Path:
    return models_dir() / model.name


def is_pulled(model: CatalogModel) -> bool:
    folder = model_folder(model)
    return all((folder / file.name).is_file() for file in model.files)


def pulled_path(name: str, kind: Literal["llm", "stt"], where: str) -> str | None:
    """The pulled model ``name`` names: its GGUF file (an LLM) or its folder (a
    recogniser); None when ``name`` is not one of the list's names of that kind
    (the caller takes it as a path). ``ValueError`` (one line) for a listed
    model that is not pulled."""
    model = find(name)
    if model is None or model.kind != kind:
        return None
    if not is_pulled(model):
        raise ValueError(
            f"{where}: model {quote(name)} is not pulled (looked in {model_folder(model)}): "
            f"voice-membrane models pull {name}"
        )
    folder = model_folder(model)
    return str(folder / model.files[0].name) if kind == "llm" else str(folder)
