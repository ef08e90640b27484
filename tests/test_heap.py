"""settle_heap: what exists once the engines are loaded leaves the collector's walk."""

from __future__ import annotations

import gc
import weakref

from voice_membrane.infra.heap import settle_heap


def test_settle_heap_freezes_what_survives_and_collects_the_rest() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    kept = Node()
    garbage = Node()
    garbage_ref = weakref.ref(garbage)
    del garbage
    try:
        frozen = settle_heap()
        # other threads (a test's engine workers) may free frozen objects
        # meanwhile: the count can only have dropped, never grown
        assert 0 < gc.get_freeze_count() <= frozen
        assert not any(o is kept for o in gc.get_objects())  # frozen: never walked again
        assert garbage_ref() is None  # collected before the freeze, not kept forever
    finally:
        gc.unfreeze()
