"""The exceptions inside (nested) exception groups, as anyio task groups raise them."""

from __future__ import annotations


def leaves(exc: BaseException) -> list[BaseException]:
    """``exc`` itself, or the exceptions inside it if it is a (nested) group, in order."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]
