"""``eager_next``: an async iterator's next item, taken at once when it is ready
(``eager``: any awaitable's value).

A stream's items mostly arrive in bursts (several SSE events in one network
read, a local model's tokens), so most waits for the next item never suspend.
Guarding each wait with a deadline costs ~10 µs (an anyio cancel scope and
its timer), more than the rest of an item's reading. ``eager_next`` runs the
first step of ``__anext__`` right away — exactly what ``await`` would run
first — and only if that step suspends does the caller get the rest, to await
under its guard:

    ready, item, rest = eager_next(items)
    if not ready:
        async with asyncio.timeout_at(at):
            item = await rest

The guard must not be an anyio cancel scope: the first step may have entered
scopes of its own, which anyio requires to exit before any entered after them.

The rest (``Suspended``) forwards what the loop sends or throws into the step,
as ``await`` itself would (a cancellation reaches the iterator where it
waits), so the item, the error and the iterator's state are the same either way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Generator
from typing import Any, Generic, TypeVar

__all__ = ["Suspended", "eager", "eager_next"]

T = TypeVar("T")


class Suspended(Generic[T]):
    """The rest of an ``__anext__`` whose first step suspended on ``yielded``.
    Awaiting it gives the item, or raises ``StopAsyncIteration`` at the end."""

    __slots__ = ("_step", "_yielded")

    def __init__(self, step: Generator[Any, Any, T], yielded: Any) -> None:
        self._step, self._yielded = step, yielded

    def __await__(self) -> Generator[Any, Any, T]:
        step, yielded = self._step, self._yielded
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                step.close()
                raise
            except BaseException as exc:  # (a cancellation): where the step waits
                try:
                    yielded = step.throw(exc)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
            else:
                try:
                    yielded = step.send(sent)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]


def eager(awaitable: Awaitable[T]) -> tuple[bool, T | None, Suspended[T] | None]:
    """``(True, value, None)`` when ``awaitable`` finished without suspending,
    else ``(False, None, rest)``: await ``rest`` for its value."""
    step = awaitable.__await__()
    try:
        yielded = step.send(None)
    except StopIteration as done:
        return True, done.value, None
    return False, None, Suspended(step, yielded)


def eager_next(
    iterator: AsyncIterator[T],
) -> tuple[bool, T | None, Suspended[T] | None]:
    """``(True, item, None)`` when the next item came without suspending (item
    None: the iterator ended), else ``(False, None, rest)``: await ``rest``,
    which raises ``StopAsyncIteration`` at the end."""
    try:
        return eager(iterator.__anext__())
    except StopAsyncIteration:
        return True, None, None
