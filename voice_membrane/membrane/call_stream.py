"""``CallStream``: one provider call's outputs as Membrane reads them.

Two things happen between the provider's iterator and the reply's reader:

- **Deadlines on the waits that suspend.** An output already read (several
  SSE events come in one network read) is taken at once (``eager_next``), at
  no timer's cost; a wait that suspends is bounded by the first-token deadline
  until the call's first progress, then by the stall deadline
  (``vendors/retry.py``).
- **Deltas that have already arrived, read as one.** When a delta is taken,
  the deltas of its kind that are ready behind it (at most ``JOINED_MOST``)
  join it: the reader, the secret filter and every stage after them then
  pass once where they would pass once per delta. Only what has
  arrived is joined — a wait that suspends ends the run — so nothing waits
  for a later delta, and a stream whose deltas come one at a time is read one
  at a time. What a reply says is the same whatever its cutting (the property
  tests hold every stage to it). Each output still passes ``arrived`` (lone
  surrogates replaced, the caller's ``on_output``: a token's time) on its own.
  Where stream policies run, deltas are read one at a time: a policy that
  ends the reply drops the chunk it ended on, and a joined chunk would take
  with it text that arrived before the cause.

Reading ahead leaves the provider's iterator in the middle of a step when the
delta after a run has not arrived. That step is awaited by the next ``next()``
as if it had just begun, and ``abandon()`` cancels it when the call ends
before (the consumer closed the reply): the iterator can then be closed. An
error raised while reading ahead is raised by the next ``next()``, after the
run that came before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import suppress

import anyio

from ..infra.eager_next import Suspended, eager_next
from ..vendors.retry import FirstTokenDeadline, StallDeadline
from ..vocab.provider_output import NativeDelta, ProviderOutput, TextDelta

__all__ = ["JOINED_MOST", "CallStream", "DeadlinePassed", "Stalled"]

# Ready deltas read as one, at most: a run of them costs its first piece the
# SDK's reading of the rest (~60 µs a delta), so a long burst is cut.
JOINED_MOST = 16

_Next = tuple[bool, ProviderOutput | None, Suspended[ProviderOutput] | None]


class DeadlinePassed(Exception):
    """The first-token deadline passed while a call was waiting for its first output."""


class Stalled(Exception):
    """The stall deadline passed while a call that had begun waited for more."""


class CallStream:
    """``outputs`` read under ``deadline`` and ``stall``; ``arrived`` sees
    each output as it comes and returns it as it is to be read;
    ``one_at_a_time``: no deltas joined."""

    __slots__ = ("_after", "_arrived", "_deadline", "_more", "_outputs", "_stall")

    def __init__(
        self,
        outputs: AsyncIterator[ProviderOutput],
        deadline: FirstTokenDeadline,
        stall: StallDeadline,
        arrived: Callable[[ProviderOutput], ProviderOutput],
        *,
        one_at_a_time: bool = False,
    ) -> None:
        self._outputs, self._deadline, self._stall = outputs, deadline, stall
        self._arrived = arrived
        self._more = 0 if one_at_a_time else JOINED_MOST - 1  # deltas read ahead behind one
        # What reading ahead met after the last run: the next step, or an error.
        self._after: _Next | Exception | None = None

    async def next(self) -> ProviderOutput | None:
        """The next output, ready deltas joined; None at the stream's end.
        Raises ``DeadlinePassed`` or ``Stalled`` when a wait outlasts its deadline."""
        after = self._after
        if after is None:
            ready, output, rest = eager_next(self._outputs)
        elif isinstance(after, Exception):
            self._after = None
            raise after
        else:
            (ready, output, rest), self._after = after, None
        if not ready:
            assert rest is not None
            output = await _wait(rest, self._deadline, self._stall)
        elif output is not None:
            self._stall.note(output)  # (the call may begin here)
        if output is None:
            return None
        output = self._arrived(output)
        if self._more and isinstance(output, NativeDelta | TextDelta):
            return self._join(output)
        return output

    async def abandon(self) -> None:
        """The call ends before the step read ahead: cancel it, so the
        provider's iterator can be closed."""
        after, self._after = self._after, None
        if isinstance(after, tuple) and after[2] is not None:
            # Cancelled where it waits, as a cancelled consumer's wait would be;
            # whatever it ends with is not read.
            with suppress(Exception):
                async with asyncio.timeout(0):
                    await after[2]

    def _join(self, first: NativeDelta | TextDelta) -> ProviderOutput:
        kind = type(first)
        texts: list[str] = []
        for _ in range(self._more):
            try:
                after = eager_next(self._outputs)
            except Exception as exc:  # (raised after the run: what came stays)
                self._after = exc
                break
            ready, output, _ = after
            if not ready or type(output) is not kind:
                self._after = after
                break
            assert output is not None
            self._stall.note(output)
            output = self._arrived(output)
            texts.append(output.text)  # type: ignore[union-attr]
        if not texts:
            return first
        return kind(first.text + "".join(texts))


async def _wait(
    rest: Suspended[ProviderOutput], deadline: FirstTokenDeadline, stall: StallDeadline
) -> ProviderOutput | None:
    """The call's next output (None at its end), whose wait suspended: only
    such a wait is guarded (an output already read costs no timer:
    ``eager_next``), never a yield to the consumer, so a consumer that holds
    the stream (first-audio priority, a slow sink) never makes it look
    stalled. Until the call's first progress the first-token deadline bounds
    the wait (``DeadlinePassed``), after it the stall deadline (``Stalled``),
    which counts the waits that end without progress. The guard is asyncio's
    timeout, not an anyio cancel scope: the step that suspended may have
    entered scopes of its own (the SDK's, httpx's), and anyio requires those to
    exit before any scope entered after them."""
    begun = stall.progress > 0
    if begun:
        at = None if stall.seconds is None else anyio.current_time() + stall.budget()
    else:
        at = deadline.at
    timeout = None
    try:
        if at is None:
            output = await rest
            stall.note(output)
            return output
        waiting_from = anyio.current_time()
        timeout = asyncio.timeout_at(at)  # (anyio's clock is the loop's)
        async with timeout:
            output = await rest
        if not stall.note(output) and begun:
            stall.waited_s += anyio.current_time() - waiting_from
        return output
    except StopAsyncIteration:
        return None
    except TimeoutError:
        if timeout is None or not timeout.expired():
            raise  # (the stream's own)
        raise (Stalled if begun else DeadlinePassed) from None
