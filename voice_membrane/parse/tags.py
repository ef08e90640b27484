"""The prefill wire format's tags: recognising a complete tag, and telling whether
a partial ``<…`` can still become one.

Known tags (each optionally written with an ``antml:`` namespace prefix)::

    <thinking>            </thinking>
    <function_calls>      </function_calls>
    <function_results>    </function_results>
    <invoke name="…">     </invoke>
    <parameter name="…">  </parameter>
    <result tool_use_id="…">  </result>
    <error tool_use_id="…">   </error>

Openers of the last four need their attribute; the others take none. Whitespace
is allowed around ``=`` and before ``>``. An attribute value cannot contain
``"`` or ``>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

TagName: TypeAlias = Literal[
    "thinking", "function_calls", "function_results", "invoke", "parameter", "result", "error"
]
TagKey: TypeAlias = tuple[bool, TagName]
"""(closing, name): the identity of a tag regardless of its attribute value."""

TAG_ATTRIBUTE: Final[dict[str, str | None]] = {
    "thinking": None,
    "function_calls": None,
    "function_results": None,
    "invoke": "name",
    "parameter": "name",
    "result": "tool_use_id",
    "error": "tool_use_id",
}
ALL_TAGS: Final[frozenset[TagKey]] = frozenset(
    (closing, name)  # type: ignore[misc]
    for name in TAG_ATTRIBUTE
    for closing in (False, True)
)

# A partial tag is held back at most this long; a longer "<…" is plain text.
MAX_TAG_LENGTH: Final = 256
_NAMESPACE: Final = "antml:"

_COMPLETE = re.compile(r"<(/?)(?:antml:)?([a-z_]+)(?:\s+([a-z_]+)\s*=\s*\"([^\">]*)\")?\s*>\Z")


@dataclass(frozen=True, slots=True)
class Tag:
    """A complete known tag."""

    closing: bool
    name: TagName
    value: str | None = None  # the attribute's value, for invoke/parameter/result/error openers

    @property
    def key(self) -> TagKey:
        return (self.closing, self.name)


def match_tag(text: str) -> Tag | None:
    """The known tag spelled by ``text`` (which starts with ``<`` and ends with ``>``), if any."""
    m = _COMPLETE.match(text)
    if m is None:
        return None
    slash, name, attr, value = m.groups()
    if name not in TAG_ATTRIBUTE:
        return None
    closing = slash == "/"
    expected = None if closing else TAG_ATTRIBUTE[name]
    if attr != expected:
        return None
    return Tag(closing, name, value)  # type: ignore[arg-type]


def _tail_prefix_pattern(attribute: str) -> re.Pattern[str]:
    # Everything that can follow an opener's name before its ">": a prefix of
    # `\s+attribute\s*=\s*"value"\s*`.
    partial_names = "|".join(re.escape(attribute[:i]) for i in range(1, len(attribute)))
    return re.compile(
        rf"(?:\s+(?:{partial_names})?|\s+{attribute}\s*(?:=\s*(?:\"[^\">]*(?:\"\s*)?)?)?)?\Z"
    )


_TAIL_PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    attribute: _tail_prefix_pattern(attribute)
    for attribute in {a for a in TAG_ATTRIBUTE.values() if a is not None}
}
_BARE_TAIL: Final = re.compile(r"\s*\Z")


def could_become_tag(partial: str, allowed: frozenset[TagKey]) -> bool:
    """Whether ``partial`` (starting with ``<``, without a ``>``) can still grow into
    one of the ``allowed`` tags."""
    if len(partial) > MAX_TAG_LENGTH:
        return False
    rest = partial[1:]
    if not rest:
        return bool(allowed)
    closing = rest.startswith("/")
    if closing:
        rest = rest[1:]
    if len(rest) < len(_NAMESPACE) and _NAMESPACE.startswith(rest):
        return any(key[0] == closing for key in allowed)
    if rest.startswith(_NAMESPACE):
        rest = rest[len(_NAMESPACE) :]
    for is_closing, name in allowed:
        if is_closing != closing:
            continue
        if name.startswith(rest):
            return True
        if rest.startswith(name):
            tail = rest[len(name) :]
            attribute = None if closing else TAG_ATTRIBUTE[name]
            pattern = _BARE_TAIL if attribute is None else _TAIL_PATTERNS[attribute]
            if pattern.match(tail):
                return True
    return False
