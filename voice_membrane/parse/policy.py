"""Stream policies: judge a reply's events as they pass, a block the moment it completes.

A policy is any object with ``on_chunk(event, state, context)``. A
``PolicyRunner`` (sans-I/O: ``feed(events) -> events``) calls it for every event
of the vocabulary — ``BlockStart``, ``Chunk``, ``BlockComplete``, from any
provider, in either mode — with the ``StreamState`` so far, and the policy says
what happens through the ``PolicyContext``:

- nothing: the event passes on unchanged;
- ``send(event)``: pass this on instead (a changed event, or several): once a
  policy sends, the event itself passes only if it is sent;
- ``drop()``: the event does not pass on;
- ``hold()``: the current block — this event and the rest of the block — is held
  back, and everything after it waits behind it, until ``release()`` or
  ``reject(reason)``; a block still held when the stream ends is rejected
  (a judge that never answered does not let a tool call run);
- ``reject(reason)``: the held block (or, unheld, the rest of the current
  block from this event on) never passes; a rejected tool call is reported
  (``take_rejected``) so the tool loop answers it with an error result saying
  why instead of running it;
- ``terminate(reason)``: the reply ends now; nothing more passes.

Policies are plain, synchronous code on the hot path of speech: a judge that
needs I/O decides on what it has (or holds, and the stream waits).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from ..vocab.events import Block, BlockComplete, BlockStart, BlockType, Chunk, Event
from ..vocab.provider_output import Usage

__all__ = [
    "OpenBlock",
    "PolicyContext",
    "PolicyRunner",
    "PolicyRunners",
    "StreamPolicy",
    "StreamState",
    "ToolAllowList",
]


@dataclass(slots=True)
class OpenBlock:
    """The block being streamed: its text so far (for a tool call, its input
    text), and a tool call's name and id once they are known."""

    index: int
    type: BlockType
    text: str = ""
    tool_name: str | None = None
    tool_id: str | None = None


@dataclass(slots=True)
class StreamState:
    """What a policy knows when it is called.

    ``blocks``: every block completed so far (those a policy rejected included);
    ``current``: the open block, if any; ``just_completed``: the block whose
    ``BlockComplete`` is being judged (None for any other event);
    ``finish_reason`` and ``usage``: the provider call's stop reason and token
    counts once they have arrived."""

    blocks: list[Block] = field(default_factory=list)
    current: OpenBlock | None = None
    just_completed: Block | None = None
    finish_reason: str | None = None
    usage: Usage | None = None


class StreamPolicy(Protocol):
    def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None: ...


_Status = Literal["held", "released", "rejected"]


class PolicyContext:
    """A policy's say over the event it is judging (see the module docstring)."""

    def __init__(self, runner: PolicyRunner) -> None:
        self._runner = runner
        self._event: Event | None = None
        self._index: int | None = None
        self._sent: list[Event] | None = None
        self._dropped = False

    def _begin(self, event: Event) -> None:
        self._event, self._sent, self._dropped = event, None, False
        self._index = event.meta.block_index if isinstance(event, Chunk) else event.index

    def send(self, event: Event) -> None:
        """Pass ``event`` on (instead of the event judged, unless that is sent too)."""
        if self._sent is None:
            self._sent = []
        self._sent.append(event)

    def drop(self) -> None:
        """The event judged does not pass on."""
        self._dropped = True

    def hold(self) -> None:
        """Hold the current block back, and everything after it, until decided."""
        if self._index is not None:
            self._runner._status.setdefault(self._index, "held")

    def release(self, index: int | None = None) -> None:
        """Let the held block (by default the current one) pass on."""
        self._runner._decide(self._index if index is None else index, "released", "")

    def reject(self, reason: str, index: int | None = None) -> None:
        """The held block (by default the current one) never passes on."""
        self._runner._decide(self._index if index is None else index, "rejected", reason)

    def terminate(self, reason: str) -> None:
        """End the reply now: this event and everything after it go nowhere."""
        if self._runner.terminated is None:
            self._runner.terminated = reason

    def _outputs(self) -> list[Event]:
        assert self._event is not None
        if self._dropped:
            return list(self._sent or [])
        return [self._event] if self._sent is None else self._sent


class PolicyRunner:
    """One policy over one reply's events (every provider call of it)."""

    def __init__(self, policy: StreamPolicy) -> None:
        self.policy = policy
        self.state = StreamState()
        self.terminated: str | None = None  # the reason, once the policy ended the reply
        self._context = PolicyContext(self)
        self._status: dict[int, _Status] = {}  # block index → what its hold came to
        self._reasons: dict[int, str] = {}
        self._queue: list[tuple[int | None, Event]] = []  # (held block it waits on, event)
        self._rejected: list[tuple[Block, str]] = []  # rejected tool calls not yet taken
        self._rejected_open: set[int] = set()  # rejected before they completed

    # ------------------------------------------------------------------ input

    def feed(self, events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if self.terminated is not None:
                break
            self._track(event)
            context = self._context
            context._begin(event)
            self.policy.on_chunk(event, self.state, context)
            self.state.just_completed = None
            if self.terminated is not None:
                self._queue.clear()  # what was held never passes
                break
            index = context._index
            owner = index if index is not None and index in self._status else None
            for sent in context._outputs():
                self._queue.append((owner, sent))
            if isinstance(event, BlockComplete) and event.index in self._rejected_open:
                self._rejected_open.discard(event.index)
                self._note_rejected(event.block, self._reasons[event.index])
            out += self._drain()
        return out

    def note_stop(self, finish_reason: str) -> None:
        self.state.finish_reason = finish_reason

    def note_usage(self, usage: Usage) -> None:
        self.state.usage = usage

    def settle(self) -> list[Event]:
        """The stream ended: a block still held is rejected (nobody let it pass);
        what waited behind it passes on."""
        for index, status in list(self._status.items()):
            if status == "held":
                self._decide(index, "rejected", "held by a policy and never released")
        return self._drain()

    def take_rejected(self) -> list[tuple[Block, str]]:
        """Tool calls rejected since the last call, with the reason."""
        taken, self._rejected = self._rejected, []
        return taken

    # ------------------------------------------------------------------ state

    def _track(self, event: Event) -> None:
        state = self.state
        if isinstance(event, BlockStart):
            state.current = OpenBlock(event.index, event.type)
        elif isinstance(event, Chunk):
            current = state.current
            if current is None or current.index != event.meta.block_index:
                current = state.current = OpenBlock(event.meta.block_index, event.meta.type)
            meta = event.meta
            if meta.type == "tool_call" and meta.tool_call_part == "name":
                current.tool_name = (current.tool_name or "") + event.text
            elif meta.type == "tool_call" and meta.tool_call_part == "id":
                current.tool_id = (current.tool_id or "") + event.text
            else:
                current.text += event.text
            if meta.tool_name and current.tool_name is None:
                current.tool_name = meta.tool_name
            if meta.tool_id and current.tool_id is None:
                current.tool_id = meta.tool_id
        else:
            state.blocks.append(event.block)
            state.just_completed = event.block
            state.current = None

    # ------------------------------------------------------------------ holds

    def _decide(self, index: int | None, status: _Status, reason: str) -> None:
        if index is None:
            return
        current = self._status.get(index)
        # Release only undoes a hold; reject works on any block not yet decided (what
        # of it already passed stays passed: hold first to keep it all back).
        if current not in ("held", None) or (status == "released" and current is None):
            return
        self._status[index] = status
        if status == "rejected":
            self._reasons[index] = reason
            block = next((b for i, b in self._completed_in_queue() if i == index), None)
            if block is not None:
                self._note_rejected(block, reason)
            else:
                self._rejected_open.add(index)

    def _completed_in_queue(self) -> list[tuple[int, Block]]:
        return [(e.index, e.block) for _, e in self._queue if isinstance(e, BlockComplete)]

    def _note_rejected(self, block: Block, reason: str) -> None:
        if block.type == "tool_call":
            self._rejected.append((block, reason))

    def _drain(self) -> list[Event]:
        out: list[Event] = []
        while self._queue:
            owner, event = self._queue[0]
            status = self._status.get(owner) if owner is not None else None
            if status == "held":
                break
            self._queue.pop(0)
            if status != "rejected":
                out.append(event)
        return out


class PolicyRunners:
    """Several policies in a row: what the first passes on, the second judges."""

    def __init__(self, policies: list[StreamPolicy] | tuple[StreamPolicy, ...]) -> None:
        self.runners = [PolicyRunner(policy) for policy in policies]

    def __bool__(self) -> bool:
        return bool(self.runners)

    @property
    def terminated(self) -> str | None:
        for runner in self.runners:  # (asked once per delta: no generator)
            if runner.terminated is not None:
                return runner.terminated
        return None

    def feed(self, events: list[Event]) -> list[Event]:
        for runner in self.runners:
            events = runner.feed(events)
        return events

    def settle(self) -> list[Event]:
        events: list[Event] = []
        for runner in self.runners:
            events = runner.feed(events) + runner.settle()
        return events

    def note_stop(self, finish_reason: str) -> None:
        for runner in self.runners:
            runner.note_stop(finish_reason)

    def note_usage(self, usage: Usage) -> None:
        for runner in self.runners:
            runner.note_usage(usage)

    def take_rejected(self) -> list[tuple[Block, str]]:
        return [taken for runner in self.runners for taken in runner.take_rejected()]


def rewrite_content(event: BlockComplete, content: str) -> BlockComplete:
    """``event`` with its block's content replaced (a policy that changed the text)."""
    return BlockComplete(event.index, replace(event.block, content=content))


class ToolAllowList:
    """Only the tools named may run. Each tool call is held from its start (so
    not even its input reaches the log before it is judged) and judged when it
    completes: allowed, it passes on; otherwise it is rejected, never runs, and
    the model is told why."""

    def __init__(self, allowed: Iterable[str]) -> None:
        self.allowed = frozenset(allowed)

    def on_chunk(self, event: Event, state: StreamState, context: PolicyContext) -> None:
        if isinstance(event, BlockStart) and event.type == "tool_call":
            context.hold()
        elif isinstance(event, BlockComplete) and event.block.type == "tool_call":
            name = event.block.tool_name or ""
            if name in self.allowed:
                context.release()
            else:
                shown = name if len(name) <= 60 else name[:57] + "…"
                context.reject(f"the tool {shown!r} is not allowed here")
