"""Turning a prefill tool call's parameter text into a value."""

from __future__ import annotations

import json
import re
from typing import Any

# Integers this long lose precision in JavaScript consumers (and in any JSON
# round trip through a float); they stay strings, exactly as written.
_LONG_INT_DIGITS = 16
_LONG_INT = re.compile(rf"\s*-?\d{{{_LONG_INT_DIGITS},}}\s*\Z")


class _NotJson(ValueError):
    pass


def _int_or_string(digits: str) -> int | str:
    if len(digits.lstrip("-")) >= _LONG_INT_DIGITS:
        return digits
    return int(digits)


def _reject_constant(name: str) -> Any:
    # NaN / Infinity are not JSON; a parameter saying "NaN" means the word.
    raise _NotJson(name)


_DECODER = json.JSONDecoder(parse_int=_int_or_string, parse_constant=_reject_constant)
# What a JSON text can start with (after whitespace): most values are plain words,
# and failing json.loads on each costs an exception.
_JSON_STARTS = frozenset('{["-0123456789tfn')


def parse_parameter_value(raw: str) -> Any:
    """A parameter's value: ``raw`` parsed as JSON when it is valid JSON, else ``raw``.

    Integers of 16 or more digits are kept as their digit strings, nested or not.
    """
    first = raw.lstrip()[:1]
    if first not in _JSON_STARTS or _LONG_INT.match(raw):
        return raw
    try:
        return _DECODER.decode(raw)
    except ValueError:
        return raw
