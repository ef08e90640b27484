"""``eager_next`` (infra/eager_next.py): an item already there is taken without
suspending; a wait that suspends is finished by awaiting the rest, which sees
what ``await`` would have: the item, the end, a cancellation where it waits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import anyio
import pytest

from voice_membrane.infra.eager_next import eager, eager_next

pytestmark = pytest.mark.anyio


async def _ready(n: int) -> AsyncGenerator[int, None]:
    for i in range(n):
        yield i


async def test_items_already_there_come_at_once_and_then_the_end() -> None:
    items = _ready(2)
    assert eager_next(items)[:2] == (True, 0)
    assert eager_next(items)[:2] == (True, 1)
    assert eager_next(items) == (True, None, None)


async def test_a_wait_that_suspends_inside_a_scope_of_its_own_is_finished_by_the_rest() -> None:
    send, receive = anyio.create_memory_object_stream[int](1)

    async def waits() -> AsyncGenerator[int, None]:
        with anyio.fail_after(5):  # a scope the step enters before it suspends (httpx's)
            item = await receive.receive()
        yield item * 10

    items = waits()
    ready, item, rest = eager_next(items)
    assert (ready, item) == (False, None) and rest is not None
    await send.send(4)
    async with asyncio.timeout(5):
        assert await rest == 40
    ready, item, rest = eager_next(items)
    assert (ready, item, rest) == (True, None, None)


async def test_a_timeout_on_the_rest_reaches_the_iterator_where_it_waits() -> None:
    closed: list[str] = []

    async def never() -> AsyncGenerator[int, None]:
        try:
            with anyio.CancelScope():
                await anyio.sleep_forever()
            yield 1
        finally:
            closed.append("cancelled where it waited")

    ready, _, rest = eager_next(never())
    assert not ready and rest is not None
    timeout = asyncio.timeout(0.01)
    with pytest.raises(TimeoutError):
        async with timeout:
            await rest
    assert timeout.expired() and closed == ["cancelled where it waited"]


async def test_an_error_after_the_wait_is_raised_by_the_rest() -> None:
    async def fails() -> AsyncGenerator[int, None]:
        await anyio.sleep(0)
        raise ValueError("the stream broke")
        yield 0

    ready, _, rest = eager_next(fails())
    assert not ready and rest is not None
    with pytest.raises(ValueError, match="the stream broke"):
        await rest


async def test_any_awaitable_gives_its_value_at_once_or_after_the_rest() -> None:
    async def ready() -> str:
        return "now"

    async def later() -> str:
        await anyio.sleep(0)
        return "later"

    assert eager(ready()) == (True, "now", None)
    done, value, rest = eager(later())
    assert (done, value) == (False, None) and rest is not None
    assert await rest == "later"
