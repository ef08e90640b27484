"""Every import path the README and docs show works, and the public API loads lazily.

The docs are read as a user reads them: each ``import`` in a ```python block,
each dotted ``voice_membrane.…`` name and each ``voice_membrane/…`` file path
anywhere in the text must resolve in the package as it is.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import voice_membrane

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+voice_membrane\S*[ \t]+import[ \t]+(?:\([^)]*\)|.*)"
    r"|import[ \t]+voice_membrane\S*)",
    re.MULTILINE,
)
DOTTED = re.compile(r"\bvoice_membrane(?:\.[A-Za-z_]\w*)+")
FILE_PATH = re.compile(r"\bvoice_membrane/[\w/.]*\w")


def _doc_texts() -> list[tuple[str, str]]:
    return [(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")) for path in DOCS]


def _shown_imports() -> list[tuple[str, str]]:
    """(where, statement) for every import of voice_membrane in a doc's code blocks."""
    found = []
    for where, text in _doc_texts():
        for block in CODE_BLOCK.findall(text):
            for match in IMPORT.finditer(block):
                found.append((where, match.group(0).strip()))
    return found


def _dotted_names() -> list[tuple[str, str]]:
    return sorted({(w, name) for w, text in _doc_texts() for name in DOTTED.findall(text)})


def _file_paths() -> list[tuple[str, str]]:
    return sorted({(w, path) for w, text in _doc_texts() for path in FILE_PATH.findall(text)})


def test_the_docs_show_imports_and_names() -> None:
    # the readers below must find something, or the tests over them check nothing
    assert len(_shown_imports()) >= 10
    assert len(_dotted_names()) >= 10
    assert len(_file_paths()) >= 10


@pytest.mark.parametrize(("where", "statement"), _shown_imports())
def test_every_import_shown_in_the_docs_runs(where: str, statement: str) -> None:
    tree = ast.parse(statement)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{where}: {statement}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)


@pytest.mark.parametrize(("where", "name"), _dotted_names())
def test_every_dotted_name_in_the_docs_resolves(where: str, name: str) -> None:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            assert hasattr(value, attribute), f"{where}: {name}"
            value = getattr(value, attribute)
        return
    pytest.fail(f"{where}: {name} is not importable")


@pytest.mark.parametrize(("where", "path"), _file_paths())
def test_every_file_path_in_the_docs_exists(where: str, path: str) -> None:
    assert (ROOT / path).exists(), f"{where}: {path}"


@pytest.mark.parametrize("name", voice_membrane.__all__)
def test_every_public_name_loads(name: str) -> None:
    assert getattr(voice_membrane, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Membranne'"):
        voice_membrane.Membranne  # type: ignore[attr-defined]  # noqa: B018


def test_importing_the_package_loads_no_vendor_sdk() -> None:
    # `voice-membrane --help` and every child process import the package first
    code = (
        "import sys, voice_membrane, voice_membrane.cli;"
        "print([m for m in ('anthropic', 'openai', 'google.genai', 'mcp', 'elevenlabs')"
        " if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"
