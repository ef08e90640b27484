"""A report section's words: markdown templates in ``benchmarks/sections/``
with the figures filled in, so the code of a section computes figures and the
prose reads as it is published."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

SECTIONS = Path(__file__).resolve().parent / "sections"
# A line "<!-- #name -->" starts the fragment "FILE#name" of a template file.
_FRAGMENT = re.compile(r"^<!-- #([\w-]+) -->\n", re.M)


@cache
def _fragments(file: str) -> dict[str, str]:
    text = (SECTIONS / f"{file}.md").read_text(encoding="utf-8")
    parts = _FRAGMENT.split(text)
    fragments = {file: parts[0]}
    fragments.update(
        {f"{file}#{name}": body for name, body in zip(parts[1::2], parts[2::2], strict=True)}
    )
    return fragments


def prose(name: str, **values: object) -> str:
    """The template ``NAME`` (``FILE`` or ``FILE#fragment``) with its ``{slots}``
    filled as ``str.format`` fills them; a slot left empty leaves no blank lines."""
    text = _fragments(name.split("#")[0])[name].format(**values)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def title(name: str) -> str:
    """The ``## `` heading of the template ``NAME``: the section's title."""
    found = re.search(r"^## (.+)$", _fragments(name.split("#")[0])[name], re.M)
    if found is None:
        raise ValueError(f"benchmarks/sections/{name}: no '## ' heading")
    return found.group(1)
