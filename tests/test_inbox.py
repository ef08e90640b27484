"""A listener's queue (pipeline/inbox.py): items in the order put, a bound
that refuses (put_nowait) or waits (put), one more item for a waiting taker,
a taker cancelled while it waits leaving nothing behind, and close refusing later puts
and failing waiting ones."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice_membrane.pipeline.inbox import Inbox


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.sampled_from(["put", "take", "yield"]), max_size=60))
def test_items_come_out_in_the_order_put_however_puts_and_takes_interleave(
    ops: list[str],
) -> None:
    async def main() -> tuple[list[int], list[int]]:
        inbox = Inbox[int](4)
        put: list[int] = []
        taken: list[int] = []
        for op in ops:
            if op == "put":
                try:
                    inbox.put_nowait(len(put))
                    put.append(len(put))
                except anyio.WouldBlock:
                    pass
            elif op == "take" and len(inbox):
                taken.append(inbox.take_nowait())
            else:
                await anyio.lowlevel.checkpoint()
        while len(inbox):
            taken.append(await inbox.take())
        return put, taken

    put, taken = anyio.run(main)
    assert taken == put


def test_put_nowait_refuses_past_the_capacity_but_not_unbounded_items() -> None:
    inbox = Inbox[str](2)
    inbox.put_nowait("a")
    inbox.put_nowait("b")
    with pytest.raises(anyio.WouldBlock):
        inbox.put_nowait("c")
    inbox.put_nowait("news", bounded=False)
    assert [inbox.take_nowait() for _ in range(3)] == ["a", "b", "news"]
    with pytest.raises(anyio.WouldBlock):
        inbox.take_nowait()


def test_a_waiting_taker_gets_one_item_beyond_the_queue() -> None:
    async def main() -> list[int]:
        inbox = Inbox[int](3)
        got: list[int] = []
        refused: list[int] = []

        async def take_one() -> None:
            got.append(await inbox.take())

        async with anyio.create_task_group() as tg:
            tg.start_soon(take_one)
            await anyio.wait_all_tasks_blocked()
            for i in range(6):  # no pass of the loop between them
                try:
                    inbox.put_nowait(i)
                except anyio.WouldBlock:
                    refused.append(i)
        assert refused == [4, 5]  # one for the taker, three queued
        return got + [inbox.take_nowait() for _ in range(len(inbox))]

    assert anyio.run(main) == [0, 1, 2, 3]


def test_put_waits_for_room() -> None:
    async def main() -> list[int]:
        inbox = Inbox[int](1)
        inbox.put_nowait(0)
        done = anyio.Event()

        async def put_more() -> None:
            await inbox.put(1)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(put_more)
            await anyio.wait_all_tasks_blocked()
            assert not done.is_set()  # full: it waits
            first = inbox.take_nowait()
            await done.wait()
        return [first, inbox.take_nowait()]

    assert anyio.run(main) == [0, 1]


def test_a_taker_cancelled_while_waiting_leaves_the_next_take_whole() -> None:
    async def main() -> list[str]:
        inbox = Inbox[str](4)
        with anyio.move_on_after(0.01):
            await inbox.take()  # cancelled while it waits
        inbox.put_nowait("kept")
        got = [await inbox.take()]
        async with anyio.create_task_group() as tg:  # and a take that waits again

            async def put_later() -> None:
                await anyio.sleep(0.01)
                inbox.put_nowait("later")

            tg.start_soon(put_later)
            got.append(await inbox.take())
        return got

    assert anyio.run(main) == ["kept", "later"]


def test_close_refuses_later_puts_and_fails_waiting_ones() -> None:
    async def main() -> None:
        inbox = Inbox[int](1)
        inbox.put_nowait(0)
        failed = anyio.Event()

        async def put_more() -> None:
            with pytest.raises(anyio.ClosedResourceError):
                await inbox.put(1)
            failed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(put_more)
            await anyio.wait_all_tasks_blocked()
            inbox.close()
            await failed.wait()
        with pytest.raises(anyio.ClosedResourceError):
            inbox.put_nowait(2, bounded=False)
        assert inbox.take_nowait() == 0  # what was queued is still taken

    anyio.run(main)


def test_an_inbox_holds_at_least_one_item() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Inbox[int](0)
