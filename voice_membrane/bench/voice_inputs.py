"""What ``bench --input`` hears: sound files, each with the text that was said
when a fixture index knows it (for the word error rate).

An ``index.json`` maps a path relative to its own folder to ``{"text": …}``
(``audio_fixtures/speech/index.json``); the nearest one in a file's folder or
above it is used. With no ``--input``, the Piper-voiced questions of the
shipped fixtures are heard, in the index's order.

``audio_fixtures/real/GROUP/references.json`` maps a file of its folder to what
a real person said in it (``real_recordings``: every group's, for the STT bench).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..pipeline.config import ConfigError

SPEECH = Path(__file__).resolve().parents[2] / "audio_fixtures" / "speech"
REAL = SPEECH.parent / "real"
SOUND_SUFFIXES = (".wav", ".flac", ".ogg")


@dataclass(frozen=True, slots=True)
class VoiceInput:
    """One file to hear; ``text``: what was said (None: unknown, no WER);
    ``said``: its utterances' texts when the index splits it (else ``text`` alone)."""

    path: Path
    text: str | None = None
    said: tuple[str, ...] = ()

    @property
    def utterances(self) -> int:
        """How many user turns the file holds."""
        return max(1, len(self.said))

    @property
    def name(self) -> str:
        return self.path.name


def default_inputs() -> list[VoiceInput]:
    """The shipped Piper questions (``ConfigError`` when the fixtures are not there:
    an installed package has none)."""
    index_path = SPEECH / "index.json"
    if not index_path.is_file():
        raise ConfigError("no shipped speech fixtures here: give --input FILE.wav or a folder")
    index = _read_index(index_path)
    return [
        _input(SPEECH / key, entry)
        for key, entry in index.items()
        if key.startswith("questions/") and str(entry.get("voice", "")).startswith("piper")
    ]


def real_recordings(root: Path = REAL) -> list[VoiceInput]:
    """Every file of every group's ``references.json`` under ``root``, by group
    and name (its group: ``path.parent.name``); ``ConfigError`` for a bad one."""
    found: list[VoiceInput] = []
    for references in sorted(root.glob("*/references.json")):
        try:
            data = json.loads(references.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{references}: not readable references ({exc})") from None
        if not isinstance(data, dict) or not all(isinstance(t, str) for t in data.values()):
            raise ConfigError(f"{references}: not a map of file names to what was said")
        found += [_input(references.parent / n, {"text": t}) for n, t in sorted(data.items())]
    return found


def voice_inputs(paths: list[Path]) -> list[VoiceInput]:
    """Each file, or each sound file of a folder (sorted); ``ConfigError`` (one
    line) for a path that is neither."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix.lower() in SOUND_SUFFIXES)
            if not found:
                raise ConfigError(f"--input {path}: no .wav, .flac or .ogg file in the folder")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError(f"--input {path}: no such file or folder")
    return [_known(path) for path in files]


def _known(path: Path) -> VoiceInput:
    resolved = path.resolve()
    for folder in resolved.parents:
        index_path = folder / "index.json"
        if index_path.is_file():
            entry = _read_index(index_path).get(resolved.relative_to(folder).as_posix())
            return VoiceInput(path) if entry is None else _input(path, entry)
    return VoiceInput(path)


def _input(path: Path, entry: dict[str, Any]) -> VoiceInput:
    text = entry.get("text")
    text = text if isinstance(text, str) else None
    utterances = entry.get("utterances")
    if isinstance(utterances, list) and utterances:
        said = tuple(str(u) for u in utterances)
    else:
        said = () if text is None else (text,)
    return VoiceInput(path, text, said)


def _read_index(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable fixture index ({exc})") from None
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}
