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

# A complete known tag, for ``search`` over a whole buffer (the scanner's one pass in
# C). Groups: 1 a closer's name; 2 a bare opener's name; 3, 4
# an invoke/parameter opener's name and value; 5, 6 a result/error opener's.
TAG_PATTERN: Final = re.compile(
    r"<(?:/(?:antml:)?(thinking|function_calls|function_results|invoke|parameter|result|error)"
    r"|(?:antml:)?(?:(thinking|function_calls|function_results)"
    r"|(invoke|parameter)\s+name\s*=\s*\"([^\">]*)\""
    r"|(result|error)\s+tool_use_id\s*=\s*\"([^\">]*)\"))\s*>"
)


_OPENER_KEY: Final[dict[str, TagKey]] = {name: (False, name) for name in TAG_ATTRIBUTE}  # type: ignore[misc]
_CLOSER_KEY: Final[dict[str, TagKey]] = {name: (True, name) for name in TAG_ATTRIBUTE}  # type: ignore[misc]


def tag_key(match: re.Match[str]) -> tuple[TagKey, str | None]:
    """The tag a ``TAG_PATTERN`` match spells: its key and attribute value."""
    last = match.lastindex  # the group that matched last tells which branch did
    if last == 1:
        return _CLOSER_KEY[match[1]], None
    if last == 2:
        return _OPENER_KEY[match[2]], None
    assert last is not None
    return _OPENER_KEY[match[last - 1]], match[last]


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
