"""XML entities in streamed text, sans-I/O: ``&lt;``, ``&amp;``, ``&#39;`` …
decoded as the text comes, an entity split across two deltas ("&am" + "p;")
held until it is whole (or the run of text ends: then it was plain text)."""

from __future__ import annotations

import re
from typing import Final

_ENTITY: Final = re.compile(r"&(lt|gt|amp|quot|apos|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});")
_PARTIAL_ENTITY: Final = re.compile(r"&(?:#[xX]?[0-9a-fA-F]{0,7}|[a-z]{0,4})\Z")
_NAMED_ENTITIES: Final = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def _replace_entity(match: re.Match[str]) -> str:
    name = match.group(1)
    if name[0] != "#":
        return _NAMED_ENTITIES[name]
    code = int(name[2:], 16) if name[1] in "xX" else int(name[1:])
    return chr(code) if code <= 0x10FFFF else match.group(0)


class EntityDecoder:
    """One run of text's entities: ``decode`` each piece; ``take_held`` at the
    run's end gives back a partial entity that never completed, as it was."""

    def __init__(self) -> None:
        self.held = ""  # a partial "&…" at the end of the text so far

    def decode(self, text: str) -> str:
        if self.held:
            text, self.held = self.held + text, ""
        amp = text.rfind("&")
        if amp >= 0 and _PARTIAL_ENTITY.match(text, amp):
            # "&am" may still become "&amp;": wait for the rest.
            self.held = text[amp:]
            text = text[:amp]
        return _ENTITY.sub(_replace_entity, text) if "&" in text else text

    def take_held(self) -> str:
        held, self.held = self.held, ""
        return held
